"""Settings (loaded once per flow run and passed down), the project paths, the one error type of bad input, lazy classes."""
