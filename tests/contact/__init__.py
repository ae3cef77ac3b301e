"""Contact detection, self-contact and stiction anchors (contact/)."""
