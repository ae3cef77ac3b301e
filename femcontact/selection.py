"""Old home of node selection; it lives in ``femcontact.spec.selection`` now."""
from .spec.selection import NodeSelector, select_nodes

__all__ = ["NodeSelector", "select_nodes"]
