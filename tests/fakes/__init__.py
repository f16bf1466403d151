"""Local fake servers (127.0.0.1 only) that speak the real protocols the gathering blocks use."""
