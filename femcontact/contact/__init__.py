"""Contact: shapes and obstacles, detection, and the ContactSet every solver reads."""
