"""Geometry on the host (numpy), below every other layer: shapes and their signed distances
(``shapes``), closest points on triangles (``closest``), signed-distance grids of triangle surfaces
(``sdf_grid``), mass properties (``mass``), contact proxies and surface samples (``proxies``)."""
