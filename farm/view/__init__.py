"""`farm view`: the interactive preview. state (pure: camera, keys, the command line), window (glfw)."""
