"""Gradients through contact (issue 33; ICF §X-B): the derivatives of a Newton-path step's end state with
respect to its start state, its controls and scene parameters by the implicit function theorem
(``step.py``), the inputs they are taken by and the State kept in memory (``inputs.py``), rollout
gradients by the adjoint method over the steps (``rollout.py``), and central finite differences of the
whole simulator as their reference (``fd.py``). docs/GRADIENTS.md."""
from .fd import step_jacobian
from .inputs import OUTPUTS, Input, Snapshot, end_state, output_sizes, resolve, restore, snapshot
from .rollout import RolloutGradient, RolloutTangents, rollout, rollout_tangents
from .step import DENSE_MAX_DOFS, NonSmoothStep, StepDerivatives, step_derivatives

__all__ = ["DENSE_MAX_DOFS", "Input", "NonSmoothStep", "OUTPUTS", "RolloutGradient", "RolloutTangents", "Snapshot", "StepDerivatives",
           "end_state", "output_sizes", "resolve", "restore", "rollout", "rollout_tangents", "snapshot", "step_derivatives", "step_jacobian"]
