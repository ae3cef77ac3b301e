"""User specs: what the user asked for, validated when it is made, and nothing else.

``Scene`` (``femcontact.scene``) creates these records and collects them; ``Model`` turns them
into numeric tables. Modules, in import order (each imports only those above it, plus the layers
below spec: ``errors``, ``meshes``, ``geometry`` (shapes, mass properties), ``math`` (quaternions)):

- ``validation`` — vec3, rotation, pose, positive/non-negative numbers, drive and motion
  functions; imports nothing from femcontact but ``errors`` (every layer may use it);
- ``names`` — the integrator, solver and linear-solver names a Scene accepts and the contact-parameter
  columns; a leaf like ``validation``;
- ``material`` — ``Material``; ``selection`` — node selectors;
- ``drive`` — ``NodeDrive`` (prescribed node/segment motion), ``Drive`` (joint PD drive);
- ``force`` — ``NodalForce``, ``BodyForce``;
- ``fem``, ``rigid``, ``rod`` — ``FemBodySpec``, ``RigidBodySpec``, ``RodSpec`` and their ``make_*``;
- ``contact`` — ``ObstacleSpec``, ``ContactParams``, ``ContactPair``;
- ``joint`` — ``JointSpec``, ``Attachment`` (and point location in an FEM body);
- ``overlap`` — ``check_initial_overlap``: bodies that overlap at t = 0 (the Simulator calls it).
"""
from .contact import ContactPair, ContactParams, ObstacleSpec
from .drive import Drive, NodeDrive
from .fem import FemBodySpec
from .force import BodyForce, NodalForce
from .joint import Attachment, JointSpec
from .material import Material
from .rigid import RigidBodySpec
from .rod import RodSpec
from .selection import NodeSelector, select_nodes

__all__ = ["Attachment", "BodyForce", "ContactPair", "ContactParams", "Drive", "FemBodySpec", "JointSpec", "Material",
           "NodalForce", "NodeDrive", "NodeSelector", "ObstacleSpec", "RigidBodySpec", "RodSpec", "select_nodes"]
