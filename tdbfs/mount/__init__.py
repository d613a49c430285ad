"""The FUSE mount: the adapter from the views to libfuse, its set-up, the daemon and how it starts,
mount points, the fstab helper, systemd's readiness notice, and the fragment listing `tdbfs mount`
takes for its daemon. The only package that knows FUSE; nothing here is imported by the layers below.
"""
