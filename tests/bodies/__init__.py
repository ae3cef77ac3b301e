"""Body systems (bodies/, dofs.py): FEM, rods, rigid bodies, joints, springs."""
