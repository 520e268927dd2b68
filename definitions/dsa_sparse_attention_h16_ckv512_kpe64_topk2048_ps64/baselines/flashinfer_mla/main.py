"""Baseline: FlashInfer's MLA paged-attention wrapper (FA3 backend, sm_90) over the selected tokens,
each query token one request whose pages are its selected tokens, with the caches seen as pages of one
token. Needs the ``flashinfer`` package (0.7.4; a carried wheel on the device).

The mapping: query token t is request t with one query row (``qo_indptr = arange(T + 1)``); its KV
pages are the valid (>= 0) entries of ``sparse_indices[t]`` in order, so ``kv_indices`` is the valid
entries of the rows concatenated, ``kv_len_arr[t]`` their count and ``kv_indptr`` its running sum from 0.
``ckv_cache.view(-1, 1, 512)`` / ``kpe_cache.view(-1, 1, 64)`` (no copy) make a physical token id
``page * 64 + offset`` the page number of a page of size 1, so the indices go in as they are. Non-causal.

FlashInfer 0.7.4 calls (flashinfer/mla/_batch_mla/):

* ``flashinfer.mla.BatchMLAPagedAttentionWrapper(float_workspace_buffer=<128 MiB uint8>, backend="fa3")``
  (_wrapper.py ``__init__``): one per device, kept in ``_WRAPPERS`` with its workspace.
* ``plan(metadata=flashinfer.mla.MLAPlanMetadata.csr(qo_indptr=, kv_indptr=, kv_indices=, kv_len_arr=),
  num_heads=16, head_dim_ckv=512, head_dim_kpe=64, page_size=1, causal=False, sm_scale=<float>,
  q_data_type=bfloat16, kv_data_type=bfloat16, query_layout="split", kv_cache_layout="split",
  lse_mode="base2")`` (_wrapper.py ``plan``, the keyword/metadata form that is not deprecated;
  _contracts.py ``MLAPlanMetadata.csr``). The metadata must be 1-D contiguous int32, on the CPU or the
  wrapper's device (_planning.py ``_validate_metadata_tensor``), with ``kv_indptr`` steps equal to
  ``ceil(kv_len / page_size)``. FA3 schedules on the host from ``qo_indptr``, ``kv_indptr`` and
  ``kv_len_arr`` (_backends/_fa_common.py ``_plan_generated_fa``, include/flashinfer/attention/
  scheduler.cuh ``MLAPlan``), so those three are built on the CPU; ``kv_indices``, which only the kernel
  reads, stays on the GPU. The split layouts are needed because q_nope/q_pe and the two caches are
  separate tensors: canonical metadata defaults to packed inputs, which refuses a pair that is not one
  buffer (_contracts.py ``_resolve_structural_mla_input``); FA3 takes independent split pairs natively.
  The sm_scale must be a Python number (_planning.py ``_MLAPlanArguments``), so ``float(sm_scale)``.
* ``run(query=(q_nope, q_pe), kv_cache=(ckv, kpe), return_lse=True)`` (_wrapper.py ``run``, structural
  form) returns ``(output [T, 16, 512] bf16, lse [T, 16] float32)``, the lse base 2 of the scaled logits
  (``return_lse_base_on_e`` left False), as the definition's.

A token without any valid index is a request with ``kv_len`` 0: the planner gives it one empty work item
and the kernel, having seen no key, writes output 0 and lse -inf (mla_hopper.cuh: ``init_states_``,
``normalize_d_`` with a zero reciprocal while the row max is -inf, ``write_o``), as the reference does;
no fix-up. FA3 plans at most 16384 work items: here one per token (its 16 head rows take one 64-row
query tile), or a few when a small batch's rows are split over the SMs; ample for the workloads.

Host synchronization, every call, counted in this baseline's time: the per-token counts come to the host
(FA3's planner needs them there), the boolean compaction of the indices waits for its size, and ``plan``
itself reads the range of ``kv_indices`` back and schedules on the CPU (in 0.7.4 it also makes its 8 MiB
integer workspace and its pinned staging buffer anew on each plan). That is what a user of this wrapper
writes for per-token sparse indices: the indices change every call, so it plans every call. Not counted:
the wrapper and its workspace (made on the first call, a warm-up), and building the FA3 module (JIT on the
first call, or FlashInfer's AOT folder that scripts/gpu/flashinfer_warm.py fills).
"""

import torch

PAGE_SIZE = 1  # tokens per FlashInfer page: the cache seen token by token
WORKSPACE_BYTES = 128 * 1024 * 1024
_WRAPPERS: dict = {}  # device -> BatchMLAPagedAttentionWrapper (holding its float workspace)


def csr(sparse_indices):
    """FlashInfer's CSR metadata for one request per token: (qo_indptr, kv_indptr, kv_len_arr) int32 on
    the CPU, kv_indices int32 on the indices' device."""
    T = sparse_indices.shape[0]
    valid = sparse_indices >= 0
    kv_len_arr = valid.sum(dim=1, dtype=torch.int32).cpu()  # host sync: the planner's lengths
    kv_indices = sparse_indices[valid].to(torch.int32)  # row by row, in order (waits for its size)
    kv_indptr = torch.cat([torch.zeros(1, dtype=torch.int32), torch.cumsum(kv_len_arr, 0, dtype=torch.int32)])
    qo_indptr = torch.arange(T + 1, dtype=torch.int32)
    return qo_indptr, kv_indptr, kv_indices, kv_len_arr


def wrapper_for(wrapper_cls, device):
    w = _WRAPPERS.get(device)
    if w is None:
        workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        w = _WRAPPERS[device] = wrapper_cls(float_workspace_buffer=workspace, backend="fa3")
    return w


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    # the device's carried wheel; imported here so the module loads without it
    from flashinfer.mla import BatchMLAPagedAttentionWrapper, MLAPlanMetadata

    T, H, Dc = q_nope.shape
    Dp = q_pe.shape[-1]
    if T == 0:  # FA3's planner refuses an empty batch
        return q_nope.new_empty(0, H, Dc), torch.empty(0, H, dtype=torch.float32, device=q_nope.device)
    qo_indptr, kv_indptr, kv_indices, kv_len_arr = csr(sparse_indices)
    wrapper = wrapper_for(BatchMLAPagedAttentionWrapper, q_nope.device)
    wrapper.plan(
        metadata=MLAPlanMetadata.csr(qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_indices=kv_indices, kv_len_arr=kv_len_arr),
        num_heads=H,
        head_dim_ckv=Dc,
        head_dim_kpe=Dp,
        page_size=PAGE_SIZE,
        causal=False,
        sm_scale=float(sm_scale),
        q_data_type=q_nope.dtype,
        kv_data_type=ckv_cache.dtype,
        query_layout="split",
        kv_cache_layout="split",
        lse_mode="base2",
    )
    ckv = ckv_cache.view(-1, PAGE_SIZE, Dc)
    kpe = kpe_cache.view(-1, PAGE_SIZE, Dp)
    output, lse = wrapper.run(query=(q_nope, q_pe), kv_cache=(ckv, kpe), return_lse=True)
    return output, lse
