"""The cells a TileDB read of the array opened at time T returns, computed from the store's decoded tiles,
streaming, each with its source (fragment and tile). Layer 3: it reads the store, the views read it."""
