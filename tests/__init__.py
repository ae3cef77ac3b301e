"""femcontact's tests, one folder per part of the package (docs/ARCHITECTURE.md, "Tests"); shared helpers
in ``tests.helpers``. A package, so that every folder imports the helpers as ``tests.helpers.…``."""
