"""API v1 views: each validates its input, calls one service or selector, and serializes."""
