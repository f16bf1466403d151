"""The service as an MCP server: its tools (tools.py) over the operations a backend gives (backend.py), in-process for
the remote endpoint POST /mcp (domain.py, remote.py) and over the REST API for `canvas mcp` on stdio
(canvas_local/client/mcp.py). Only the MCP function and `canvas mcp` import it: the `mcp` SDK is theirs alone."""
