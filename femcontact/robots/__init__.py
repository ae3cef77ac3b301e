"""Robots from URDF files (``Scene.add_robot``) and their joint-space helpers."""
from .urdf import KNOWN_ROBOTS, PANDA_READY, Robot, RobotJoint, load_robot, robot_urdf_path

__all__ = ["KNOWN_ROBOTS", "PANDA_READY", "Robot", "RobotJoint", "load_robot", "robot_urdf_path"]
