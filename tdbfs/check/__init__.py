"""`tdbfs check`: every finding of an array or a group, in one process, a pool of processes
(`--jobs`) or a Dask cluster (`--dask`), the same findings the mount shows."""
