"""What the front ends (the mount, the check, the command line, the library) share and the layers
below never do: one-line errors, the key read from a file or the environment, object-store options,
and the store opened from a location. It imports no front end.
"""
