"""The deployed stack's scenarios (``pytest -m deployed``): tests/deployed/scenario.py."""
