"""Small linear algebra for kernels (``smallmat``)."""
