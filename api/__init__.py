"""Fleetline's REST API v1 (``/api/v1/``), its API tokens and the ``fleetline`` command line."""
