# SPDX-License-Identifier: Apache-2.0
"""The differences the suite has shown, each triaged by hand from the cases below it in the
report (rewrite this when a run shows a new one)."""

TEXT = """No gradref bug so far: every gradref result of every pair is inside the bound. What
differs:

1. **Upstream bug: TensorFlow's DepthwiseConv2dNativeBackpropInput with dilations > 1.** The
   CPU op accepts `dilations` but its result is not the dilated convolution's gradient (the
   "upstream outside the bound" cases of that row all have d > 1). Minimal repro:
   `input_sizes=[1, 7, 7, 1]`, filter (3, 1, 1, 1), `strides=[1, 1, 1, 1]`,
   `dilations=[1, 2, 1, 1]`, `padding="SAME"`: the largest difference from the formula is 2.4
   for unit-normal data. With VALID padding oneDNN refuses the same call ("could not create a
   primitive descriptor"). gradref.tf computes the dilated gradient, as TF's
   Conv2DBackpropInput and the GPU kernels define it (its depthwise form is
   conv2d_backprop_input with groups = channels). DepthwiseConv2dNativeBackpropFilter has the
   same fault: every "upstream outside the bound" case of its row has a dilation > 1, where
   gradref's filter gradient (conv3d_backprop_filter with groups = channels) is inside.
2. **Upstream refusals on the CPU (coverage, not semantics).** TensorFlow's CPU kernels refuse
   grouped Conv2DBackpropInput ("Gradients for grouped convolutions are not supported on
   CPU"), grouped Conv3DBackprop*V2 ("input and filter must have the same depth"),
   Conv2DBackpropInput with dilations > 1 and depthwise with unequal strides (the filter
   gradient also with EXPLICIT padding and a dilation: "Number of cols of out_backprop doesn't
   match", and VALID with a dilation: oneDNN's "could not create a primitive"); fbgemm-gpu-cpu
   registers only `recat_embedding_grad_output_mixed_D` for the CPU (the other two recat ops
   are CUDA-only: "Could not run ... with arguments from the 'CPU' backend"). gradref computes
   all of these; its recat ops are held to FBGEMM's CUDA source by the main suite.
3. **Semantic difference: half-precision arithmetic.** For float16 and bfloat16, PyTorch's
   grid_sampler_3d_backward rounds every operation to the input dtype, so its results fall
   outside the float32-summation bound (errors up to about half of sum|terms|; its float32
   results are bit-identical to gradref's). So does PyTorch's eager autograd of the RoPE
   forward (HF's rotate_half, GPT-J's interleaved): each product, the rotation's negation and
   the sum round to the 16-bit type, so most 16-bit cases fall outside the bound, while its
   float32 gradients are bit-identical to gradref.torch.rotary_embedding_backward's (the
   adjoint's two products and one sum in float32). TensorFlow's float16/bfloat16 paths with
   EXPLICIT padding (Conv2DBackpropInput, DepthwiseConv2dNativeBackpropInput; Eigen rather
   than oneDNN) round intermediate sums to the 16-bit type: errors of one or two of its ulps,
   just past the bound. gradref sums in float32 and rounds once (its pages say so), which is
   also what CANN and MegEngine's FLOAT32 compute mode do.
4. **Environment hazard: TensorFlow and PyTorch in one process.** With tensorflow imported
   first, aten's bfloat16 convolution_backward returned grad_weight values near 3e16 for
   N2 C2 O2, input 3x1, kernel 1x3, stride (1, 3), padding (0, 1) (both bundle oneDNN); each
   upstream therefore runs in its own process here.
5. **Upstreams not run.** megengine 1.13.1 (the seed system of conv_backprop_data) has no
   wheel for CPython 3.11 on PyPI ("No matching distribution found"); its semantics stay held
   by the transcribed tests of the main suite. ATB's RopeGrad exists only for Ascend devices.
6. **MindSpore, the Ascend operators' framework.** Its CPU GridSampler3DGrad (through
   mindspore.vjp of ops.grid_sample) is bit-identical to gradref's CANN dialect in float32
   and within the bound in float16 (CANN's GridSampler3DGrad semantics: PyTorch's formula),
   and its Conv3D gradients are within the bound in both dtypes. Its CPU kernel refuses
   bfloat16 ("Unsupported data type"), so no bfloat16 row is run. The two float16
   GridSampler3DGrad cases that differ are nearest mode with reflection padding and grids far
   outside [-1, 1] (spread 3): a reflected source coordinate lands within rounding of a
   half-integer, and gradref's float32 coordinates (PyTorch's formula, CANN's float32
   arithmetic for float16 inputs) pick the neighbouring voxel where MindSpore's float16 call
   and its float64 call (the truth) agree; hence gradref's max error of 1.0 of sum|terms| in
   that row, inside the bound's coordinate slack. In float32 the two agree bit for bit.
7. **Semantic difference: non-finite grid coordinates.** CUDA's and CANN's
   `safe_downgrade_to_int_range` take a NaN or infinite source coordinate out of range (the
   point adds nothing to dx and its dgrid is 0), and PyTorch's CPU kernel gives the same on
   x86; gradref does so everywhere (docs/grid_sampler3d_grad.md), bit for bit with PyTorch and
   MindSpore in float32 here. Paddle leaves NaN in such a point's dgrid (its dx agrees),
   so its own float64 call, this row's truth, puts gradref "outside the bound" at exactly those
   points (the max error "inf" of the Paddle row). gradref follows PyTorch, which it ports; a
   port of Paddle's kernel would expect NaN there. Strided inputs and NaN/Inf in the RoPE
   gradients and TensorFlow's dy showed no difference of value. Where a result is NaN, its
   bits can differ: gradref stores every NaN as the canonical quiet NaN 0x7fc00000 (its NaN
   rule, docs/api.md), while x86 arithmetic makes the default NaN with the sign bit set; the
   RoPE float32 cases that are not identical differ only there.
"""
