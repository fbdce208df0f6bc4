"""A real OpenID Connect provider for the single sign-on tests: a small Django project on
django-oauth-toolkit, run in a process of its own on a loopback port (`serve`), driven by the
tests through `fixtures`."""
