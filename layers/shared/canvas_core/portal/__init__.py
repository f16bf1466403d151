"""The developer portal and the canvas viewer: HTML, CSS and JS files (assets/) served by one function, which
signs an account holder in with a key, keeps a session, and answers the pages' JSON calls (routes.py)."""
