"""The batched decoder of the ``torch`` rollout engine (:mod:`rlvr.rollout.torch_engine`), one
concept per module:

- :mod:`~rlvr.rollout.decoder.support`: which models it runs (``UnsupportedModelError``).
- :mod:`~rlvr.rollout.decoder.snapshot`: the policy's weights copied into the compute dtype
  (``snapshot_weights`` -> ``DecoderWeights``).
- :mod:`~rlvr.rollout.decoder.linear`: the matmuls, weights prepacked for oneDNN.
- :mod:`~rlvr.rollout.decoder.ops`: RMSNorm, rotary embedding and SwiGLU in pure torch.
- :mod:`~rlvr.rollout.decoder.caches`: the KV caches and their decode attention.
- :mod:`~rlvr.rollout.decoder.forward`: prefill and decode step (``Decoder``).
- :mod:`~rlvr.rollout.decoder.memory`: process memory hints (glibc malloc, huge pages).
"""
