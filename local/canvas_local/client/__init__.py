"""The `canvas` commands that use a running service over HTTP (`run`, `status`, `wait`, `download`, `runs`, `dag`,
`tasks`): `http.py` talks to the API, `commands.py` is what the commands do, `progress.py`, `views.py` and
`downloads.py` what they show and save."""
