"""xerj's MCP surface: ``xerj mcp`` (memory, brain and document tools for agents) and ``xerj init``."""
