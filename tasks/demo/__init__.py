"""The embedded demo, kept apart from the platform: the calculator domain and its golden set
(``domain``), the simulated agent and users (``agent``, ``simulate``), and the base model v0
(``pretrain``, ``bootstrap``, the ``llama_profile``). It plugs into the platform as a user's
own domain would; only the whole-loop flow and the bootstrap entry import it."""
