//! The layers of the convolutional renderers, on frame-major activations (`[frames, channels]`
//! row-major, one frame's channels contiguous): full 1-D convolutions as one packed product
//! over the unfolded input, depthwise convolutions and layer norms vectorised across channels,
//! the transposed convolution that upsamples, and the ConvNeXt block built from them.
//!
//! Each is copied from its Burn module and computes what the module computes (stride 1,
//! "same" padding, no dilation, as the codec crate builds them), checked at load.

use burn::module::Param;
use burn::nn::conv::{Conv1d, ConvTranspose1d};
use burn::nn::{LayerNorm, Linear, PaddingConfig1d};
use burn::tensor::Tensor;
use voxspec_codec::vocoder::{ConvNextBlock, NORM_EPSILON};

use crate::error::{EngineError, Result};
use crate::matmul::{Kernel, PackedLinear, WeightFormat};
use crate::ops::NormWeights;
use crate::stack::{linear, read_param};
use crate::vmath::gelu_in_place;

fn model_error(detail: String) -> EngineError {
    EngineError::Model { detail }
}

fn bias(b: &Option<Param<Tensor<1>>>, n: usize, name: &str) -> Result<Vec<f32>> {
    match b {
        Some(b) => read_param(b, name),
        None => Ok(vec![0.0; n]),
    }
}

/// A layer norm over the channels, as the codec crate builds them (ε = [`NORM_EPSILON`]).
pub(crate) fn layer_norm(n: &LayerNorm, name: &str) -> Result<NormWeights> {
    let gamma = read_param(&n.gamma, name)?;
    let beta = bias(&n.beta, gamma.len(), name)?;
    Ok(NormWeights::Layer {
        gamma,
        beta,
        eps: NORM_EPSILON as f32,
    })
}

/// A linear layer with its weight stored as `format`.
pub(crate) fn packed(l: &Linear, name: &str, format: WeightFormat) -> Result<PackedLinear> {
    Ok(linear(l, name)?.into_format(format))
}

/// A full 1-D convolution (`c_in → c_out`, odd kernel `k`, stride 1, padding `k / 2` each
/// side): the input unfolded to `[frames, k · c_in]`, then one packed product.
#[derive(Debug, Clone)]
pub(crate) struct Conv {
    k: usize,
    c_in: usize,
    /// `[k · c_in] → [c_out]`: row `j · c_in + c` holds tap `j` of input channel `c`.
    product: PackedLinear,
}

impl Conv {
    pub(crate) fn from_burn(conv: &Conv1d, name: &str, format: WeightFormat) -> Result<Self> {
        let [c_out, c_in, k] = conv.weight.val().dims();
        check_same(conv, name)?;
        let w = read_param(&conv.weight, name)?; // [c_out, c_in, k]
        let mut packed = vec![0.0f32; k * c_in * c_out];
        for o in 0..c_out {
            for c in 0..c_in {
                for j in 0..k {
                    packed[(j * c_in + c) * c_out + o] = w[(o * c_in + c) * k + j];
                }
            }
        }
        let b = bias(&conv.bias, c_out, name)?;
        Ok(Self {
            k,
            c_in,
            product: PackedLinear::new(&packed, k * c_in, c_out, Some(b))?.into_format(format),
        })
    }

    pub(crate) fn c_out(&self) -> usize {
        self.product.out_features()
    }

    /// # Shapes
    /// - `x`: `[frames, c_in]`; `y`: `[frames, c_out]` (overwritten); `cols`: scratch
    pub(crate) fn forward(&self, x: &[f32], frames: usize, cols: &mut Vec<f32>, y: &mut [f32]) {
        let (k, c) = (self.k, self.c_in);
        let pad = k / 2;
        cols.clear();
        cols.resize(frames * k * c, 0.0);
        for t in 0..frames {
            for j in 0..k {
                let Some(src) = (t + j).checked_sub(pad).filter(|&s| s < frames) else {
                    continue;
                };
                let dst = (t * k + j) * c;
                cols[dst..dst + c].copy_from_slice(&x[src * c..(src + 1) * c]);
            }
        }
        self.product.forward(cols, frames, y);
    }
}

/// Burn's "same" convolution of the codec crate: odd kernel, stride 1, no dilation, `k / 2`
/// padding on each side.
fn check_same(conv: &Conv1d, name: &str) -> Result<()> {
    let k = conv.kernel_size;
    let same = match conv.padding {
        PaddingConfig1d::Explicit(a, b) => a == k / 2 && b == k / 2,
        PaddingConfig1d::Valid => k == 1,
        _ => false,
    };
    if conv.stride != 1 || conv.dilation != 1 || k.is_multiple_of(2) || !same {
        return Err(model_error(format!(
            "{name}: only odd kernels with stride 1, dilation 1 and k/2 padding run natively \
             (kernel {k}, stride {}, dilation {}, groups {}, {:?})",
            conv.stride, conv.dilation, conv.groups, conv.padding
        )));
    }
    Ok(())
}

/// A depthwise 1-D convolution (one odd kernel per channel, "same" padding).
#[derive(Debug, Clone)]
pub(crate) struct DepthwiseConv {
    k: usize,
    /// `[k, channels]`: tap-major, so a tap runs across the channels.
    taps: Vec<f32>,
    /// `[channels]`.
    bias: Vec<f32>,
}

impl DepthwiseConv {
    pub(crate) fn from_burn(conv: &Conv1d, name: &str) -> Result<Self> {
        let [c, one, k] = conv.weight.val().dims();
        check_same(conv, name)?;
        if one != 1 || conv.groups != c {
            return Err(model_error(format!(
                "{name}: a depthwise convolution has one input channel per group (weight \
                 [{c}, {one}, {k}], {} groups)",
                conv.groups
            )));
        }
        let w = read_param(&conv.weight, name)?;
        let mut taps = vec![0.0f32; k * c];
        for ch in 0..c {
            for j in 0..k {
                taps[j * c + ch] = w[ch * k + j];
            }
        }
        Ok(Self {
            k,
            taps,
            bias: bias(&conv.bias, c, name)?,
        })
    }

    /// # Shapes
    /// - `x`, `y`: `[frames, channels]` (`y` overwritten)
    pub(crate) fn forward(&self, x: &[f32], frames: usize, y: &mut [f32]) {
        match Kernel::detect().widening() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx512` is detected only on CPUs with AVX-512F.
            Kernel::Avx512 => unsafe { self.forward_avx512(x, frames, y) },
            _ => self.forward_body(x, frames, y),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn forward_avx512(&self, x: &[f32], frames: usize, y: &mut [f32]) {
        self.forward_body(x, frames, y);
    }

    #[inline(always)]
    fn forward_body(&self, x: &[f32], frames: usize, y: &mut [f32]) {
        let c = self.bias.len();
        let pad = self.k / 2;
        for (t, out) in y.chunks_exact_mut(c).take(frames).enumerate() {
            out.copy_from_slice(&self.bias);
            for (j, tap) in self.taps.chunks_exact(c).enumerate() {
                let Some(src) = (t + j).checked_sub(pad).filter(|&s| s < frames) else {
                    continue;
                };
                for ((o, &w), &v) in out.iter_mut().zip(tap).zip(&x[src * c..(src + 1) * c]) {
                    *o += w * v;
                }
            }
        }
    }
}

/// A transposed 1-D convolution that upsamples by its stride `u` (output `frames · u`).
#[derive(Debug, Clone)]
pub(crate) struct Upsample {
    k: usize,
    stride: usize,
    pad: usize,
    c_out: usize,
    /// `[c_in] → [k · c_out]`: column `j · c_out + o` holds tap `j` of output channel `o`.
    product: PackedLinear,
    bias: Vec<f32>,
}

impl Upsample {
    pub(crate) fn from_burn(
        conv: &ConvTranspose1d,
        name: &str,
        format: WeightFormat,
    ) -> Result<Self> {
        let [c_in, c_out, k] = conv.weight.val().dims();
        let (stride, pad) = (conv.stride, conv.padding);
        if conv.groups != 1 || conv.dilation != 1 || conv.padding_out != 0 || k != stride + 2 * pad
        {
            return Err(model_error(format!(
                "{name}: only an ungrouped transposed convolution with kernel = stride + 2 · \
                 padding runs natively (weight [{c_in}, {c_out}, {k}], stride {stride}, padding \
                 {pad}, output padding {}, dilation {}, groups {})",
                conv.padding_out, conv.dilation, conv.groups
            )));
        }
        let w = read_param(&conv.weight, name)?; // [c_in, c_out, k]
        let mut packed = vec![0.0f32; c_in * k * c_out];
        for c in 0..c_in {
            for o in 0..c_out {
                for j in 0..k {
                    packed[c * k * c_out + j * c_out + o] = w[(c * c_out + o) * k + j];
                }
            }
        }
        Ok(Self {
            k,
            stride,
            pad,
            c_out,
            product: PackedLinear::new(&packed, c_in, k * c_out, None)?.into_format(format),
            bias: bias(&conv.bias, c_out, name)?,
        })
    }

    /// Output frames per input frame.
    pub(crate) fn factor(&self) -> usize {
        self.stride
    }

    /// # Shapes
    /// - `x`: `[frames, c_in]`; `y`: `[frames · u, c_out]` (overwritten); `z`: scratch
    pub(crate) fn forward(&self, x: &[f32], frames: usize, z: &mut Vec<f32>, y: &mut [f32]) {
        let (k, c, out_len) = (self.k, self.c_out, frames * self.stride);
        z.clear();
        z.resize(frames * k * c, 0.0);
        self.product.forward(x, frames, z);
        for row in y.chunks_exact_mut(c).take(out_len) {
            row.copy_from_slice(&self.bias);
        }
        for t in 0..frames {
            for j in 0..k {
                let Some(s) = (t * self.stride + j)
                    .checked_sub(self.pad)
                    .filter(|&s| s < out_len)
                else {
                    continue;
                };
                let src = &z[(t * k + j) * c..(t * k + j + 1) * c];
                for (o, &v) in y[s * c..(s + 1) * c].iter_mut().zip(src) {
                    *o += v;
                }
            }
        }
    }
}

/// One ConvNeXt block: `x + γ · W_down GELU(W_up LN(dwconv(x)))`.
#[derive(Debug, Clone)]
pub(crate) struct ConvNext {
    dwconv: DepthwiseConv,
    norm: NormWeights,
    up: PackedLinear,
    down: PackedLinear,
    gamma: Vec<f32>,
}

/// Buffers a stack of blocks reuses.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    pub(crate) a: Vec<f32>,
    pub(crate) b: Vec<f32>,
    pub(crate) wide: Vec<f32>,
}

impl Scratch {
    fn sized(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
        if v.len() < len {
            v.resize(len, 0.0);
        }
        &mut v[..len]
    }
}

impl ConvNext {
    pub(crate) fn from_burn(
        block: &ConvNextBlock,
        name: &str,
        format: WeightFormat,
    ) -> Result<Self> {
        Ok(Self {
            dwconv: DepthwiseConv::from_burn(&block.dwconv, &format!("{name}.dwconv"))?,
            norm: layer_norm(&block.norm, &format!("{name}.norm"))?,
            up: packed(&block.up, &format!("{name}.up"), format)?,
            down: packed(&block.down, &format!("{name}.down"), format)?,
            gamma: read_param(&block.gamma, &format!("{name}.gamma"))?,
        })
    }

    /// The block applied to `x` in place.
    ///
    /// # Shapes
    /// - `x`: `[frames, dim]`
    pub(crate) fn forward(&self, x: &mut [f32], frames: usize, s: &mut Scratch) {
        let dim = self.gamma.len();
        let wide = self.up.out_features();
        let h = Scratch::sized(&mut s.a, frames * dim);
        self.dwconv.forward(x, frames, h);
        let n = Scratch::sized(&mut s.b, frames * dim);
        self.norm.forward(h, n);
        let u = Scratch::sized(&mut s.wide, frames * wide);
        self.up.forward(n, frames, u);
        gelu_in_place(u);
        let h = Scratch::sized(&mut s.a, frames * dim);
        self.down.forward(&s.wide[..frames * wide], frames, h);
        for (xr, hr) in x.chunks_exact_mut(dim).zip(h.chunks_exact(dim)) {
            for ((o, &v), &g) in xr.iter_mut().zip(hr).zip(&self.gamma) {
                *o += g * v;
            }
        }
    }
}
