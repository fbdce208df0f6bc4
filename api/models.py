"""Personal API tokens: django-rest-knox's token (only a digest of the secret is stored) with the
name its owner gave it, so that a list of tokens says which script holds which."""

from __future__ import annotations

from django.db import models
from knox.models import AbstractAuthToken

TOKEN_NAME_MAX_LENGTH = 100


class ApiToken(AbstractAuthToken):
    name = models.CharField(max_length=TOKEN_NAME_MAX_LENGTH)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.token_key}…) of {self.user}"
