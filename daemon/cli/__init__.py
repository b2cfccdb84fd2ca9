"""The ``cambium`` command line: reads ask the running daemon where they can (``status``,
``memory recall``) and otherwise go to the store (through the repositories) and the files;
writes go through the daemon's ingress. May import services and everything below them, and
``daemon.process`` for ``cambium run``."""
