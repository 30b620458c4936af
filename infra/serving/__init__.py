"""Serving: the model servers and the local generation that the release and the gateway call.
The model versions in the object store (:mod:`infra.serving.models`), a causal LM loaded with
its adapter (:mod:`infra.serving.causal_lm`), answers generated in process
(:mod:`infra.serving.local_lm`, :mod:`infra.serving.local_sampling`) or over HTTP as the
gateway asks them (:mod:`infra.serving.answers`), and the model servers behind them, one per
base model (:mod:`infra.serving.model_server`, :mod:`infra.serving.base_servers`,
:mod:`infra.serving.vllm_process`)."""
