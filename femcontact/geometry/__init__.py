"""Geometry on the host (numpy), below every other layer: shapes and their signed distances
(``shapes``), mass properties (``mass``), contact proxies and surface samples (``proxies``)."""
