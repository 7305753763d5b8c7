"""forecasters package."""
