"""Old home of the obstacle and contact-parameter specs; they live in ``femcontact.spec.contact``
now (the detection and the parameter table read them from there)."""
from ..spec.contact import (PARAM_KEYS, ContactPair, ContactParams, ObstacleSpec, friction_pair, make_contact_pair,
                            make_obstacle)
from ..spec.validation import evaluate_motion

__all__ = ["PARAM_KEYS", "ContactPair", "ContactParams", "ObstacleSpec", "evaluate_motion", "friction_pair",
           "make_contact_pair", "make_obstacle"]
