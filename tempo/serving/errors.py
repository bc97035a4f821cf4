"""Exceptions shared by the serving modules (kept here so that neither the refresher nor the
runtime has to import the other to name them)."""


class PeerStopped(RuntimeError):
    """A peer rank's refresher stopped: this rank's refresher stops after the same round."""
