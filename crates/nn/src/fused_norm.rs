//! LayerNorm and RMSNorm as single fused operations on the CPU, forward and backward.
//!
//! Under autodiff Burn builds a norm from its primitive operations (mean, subtraction,
//! variance, square root, division, scale, shift), each a pass over the activations with its
//! own backward: in the GPT-2-shaped training step on 2 cores that made LayerNorm 7–11 % of
//! the step, eight times PyTorch's. Here each norm is one custom operation (a backend extension
//! with its own backward pass): on flex one parallel pass over the rows forward, and one
//! backward that gives the input's gradient and the scale's and shift's together. The row
//! statistics are recomputed in the backward pass rather than stored.
//!
//! With `centre`, LayerNorm: `y = (x − μ) · r · γ + β`, `r = 1 / sqrt(var + ε)` (biased
//! variance); without, RMSNorm: `y = x · r · γ`, `r = 1 / sqrt(mean(x²) + ε)`. Backward, with
//! `x̂` the normalised input and `g = dy · γ`:
//!
//! ```text
//! dx = r · (g − mean(g) − x̂ · mean(g · x̂))      (RMSNorm: without the mean(g) term)
//! dγ = Σ_rows dy · x̂          dβ = Σ_rows dy
//! ```

use burn::backend::TensorMetadata;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, Flex, backend_extension};
use burn::tensor::{Tensor, TensorData};
use rayon::prelude::*;

use crate::activation::{contiguous, fused_here};

/// The fused norms; implemented for flex and for autodiff over it.
#[backend_extension(Flex, Autodiff)]
pub trait FusedNorm: Backend {
    /// The norm of every row of `x` (`[rows, d]`; `gamma`, `beta`: `[d]`).
    fn fused_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
        centre: bool,
    ) -> FloatTensor<Self>;
    /// `[rows + 2, d]`: the input's gradient (`rows` rows), then `dγ`, then `dβ`.
    fn fused_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        eps: f32,
        centre: bool,
    ) -> FloatTensor<Self>;
}

/// The norm over the last axis of `x`, fused where `x` is f32 on flex (with or without
/// autodiff); `None` elsewhere, where the caller runs Burn's module.
///
/// # Shapes
/// - `x`: `[..., d]`, `gamma`, `beta`: `[d]`; output: as `x`
pub(crate) fn norm<const D: usize>(
    x: Tensor<D>,
    gamma: Tensor<1>,
    beta: Option<Tensor<1>>,
    eps: f64,
    centre: bool,
) -> Option<Tensor<D>> {
    if !fused_here(&x) || !fused_here(&gamma) {
        return None;
    }
    let dims = x.dims();
    let d = dims[D - 1];
    let rows = dims[..D - 1].iter().product::<usize>();
    let beta = beta.unwrap_or_else(|| Tensor::zeros([d], &gamma.device()));
    let y = <Dispatch as FusedNorm>::fused_norm(
        x.reshape([rows, d]).into_dispatch(),
        gamma.into_dispatch(),
        beta.into_dispatch(),
        eps as f32,
        centre,
    );
    Some(Tensor::<2>::from_dispatch(y).reshape(dims))
}

impl FusedNorm for Flex {
    fn fused_norm(
        x: FlexTensor,
        gamma: FlexTensor,
        beta: FlexTensor,
        eps: f32,
        centre: bool,
    ) -> FlexTensor {
        let shape: Vec<usize> = x.layout().shape().iter().copied().collect();
        let d = shape[1];
        let (x, gamma, beta) = (contiguous(x), contiguous(gamma), contiguous(beta));
        let (Some(xs), Some(g), Some(b)) = (
            x.as_slice::<f32>(),
            gamma.as_slice::<f32>(),
            beta.as_slice::<f32>(),
        ) else {
            unreachable!("f32 tensors, checked by `norm`")
        };
        let mut out = vec![0f32; xs.len()];
        out.par_chunks_mut(d * ROWS)
            .zip(xs.par_chunks(d * ROWS))
            .for_each(|(o, x)| {
                with_simd(|| {
                    for (o, x) in o.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
                        let (mean, r) = stats(x, eps, centre);
                        for (((o, &x), &g), &b) in o.iter_mut().zip(x).zip(g).zip(b) {
                            *o = (x - mean) * r * g + b;
                        }
                    }
                })
            });
        FlexTensor::from_data(TensorData::new(out, shape))
    }

    fn fused_norm_backward(
        x: FlexTensor,
        gamma: FlexTensor,
        grad: FlexTensor,
        eps: f32,
        centre: bool,
    ) -> FlexTensor {
        let [rows, d] = [x.layout().shape()[0], x.layout().shape()[1]];
        let (x, gamma, grad) = (contiguous(x), contiguous(gamma), contiguous(grad));
        let (Some(xs), Some(g), Some(dys)) = (
            x.as_slice::<f32>(),
            gamma.as_slice::<f32>(),
            grad.as_slice::<f32>(),
        ) else {
            unreachable!("f32 tensors, checked by `norm`")
        };
        let mut out = vec![0f32; (rows + 2) * d];
        let (dx, params) = out.split_at_mut(rows * d);
        // Each task adds its rows' dγ and dβ into its own pair of sums; the pairs are added
        // at the end.
        let partial = dx
            .par_chunks_mut(d * ROWS)
            .zip(xs.par_chunks(d * ROWS).zip(dys.par_chunks(d * ROWS)))
            .map(|(dx, (x, dy))| {
                let mut sums = vec![0f32; 2 * d];
                with_simd(|| {
                    let (dgamma, dbeta) = sums.split_at_mut(d);
                    for ((dx, x), dy) in dx
                        .chunks_exact_mut(d)
                        .zip(x.chunks_exact(d))
                        .zip(dy.chunks_exact(d))
                    {
                        row_backward(x, dy, g, eps, centre, dx, dgamma, dbeta);
                    }
                });
                sums
            })
            .reduce(
                || vec![0f32; 2 * d],
                |mut a, b| {
                    for (a, b) in a.iter_mut().zip(&b) {
                        *a += b;
                    }
                    a
                },
            );
        params.copy_from_slice(&partial);
        FlexTensor::from_data(TensorData::new(out, [rows + 2, d]))
    }
}

/// Rows per parallel task.
const ROWS: usize = 16;

/// `(μ, r)` of one row: its mean (0 without `centre`) and `1 / sqrt(var + ε)` (RMSNorm:
/// `1 / sqrt(mean(x²) + ε)`).
#[inline(always)]
fn stats(x: &[f32], eps: f32, centre: bool) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = if centre {
        x.iter().sum::<f32>() / n
    } else {
        0.0
    };
    let var = x.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// One row's input gradient into `dx`, its `dy · x̂` and `dy` added to `dgamma`, `dbeta`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn row_backward(
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    eps: f32,
    centre: bool,
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) {
    let n = x.len() as f32;
    let (mean, r) = stats(x, eps, centre);
    let (mut sum_g, mut sum_gx) = (0f32, 0f32);
    for ((&x, &dy), &g) in x.iter().zip(dy).zip(gamma) {
        let xhat = (x - mean) * r;
        sum_g += dy * g;
        sum_gx += dy * g * xhat;
    }
    let mean_g = if centre { sum_g / n } else { 0.0 };
    let mean_gx = sum_gx / n;
    for (((((dx, &x), &dy), &g), dg), db) in dx
        .iter_mut()
        .zip(x)
        .zip(dy)
        .zip(gamma)
        .zip(dgamma.iter_mut())
        .zip(dbeta.iter_mut())
    {
        let xhat = (x - mean) * r;
        *dx = r * (dy * g - mean_g - xhat * mean_gx);
        *dg += dy * xhat;
        *db += dy;
    }
}

/// Runs `f` compiled for AVX-512 or AVX2 + FMA when the CPU has them (`f` is inlined into
/// each variant).
#[inline(always)]
fn with_simd<R>(f: impl FnOnce() -> R) -> R {
    crate::activation::with_simd(f)
}

impl<B: Backend + FusedNorm, C: CheckpointStrategy> FusedNorm for Autodiff<B, C> {
    fn fused_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
        centre: bool,
    ) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct NormBackward;

        impl<B: Backend + FusedNorm> Backward<B, 3> for NormBackward {
            type State = (NodeId, NodeId, f32, bool, usize);

            fn backward(
                self,
                ops: Ops<Self::State, 3>,
                grads: &mut Gradients,
                checkpointer: &mut Checkpointer,
            ) {
                let [node_x, node_gamma, node_beta] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                let (x, gamma, eps, centre, rows) = ops.state;
                let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x);
                let gamma = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(gamma);
                let d = gamma.shape()[0];
                let all = B::fused_norm_backward(x, gamma, grad, eps, centre);
                let row = |i: usize| {
                    B::float_reshape(
                        B::float_slice(all.clone(), &[(i..i + 1).into(), (0..d).into()]),
                        [d].into(),
                    )
                };
                if let Some(node) = node_gamma {
                    grads.register::<B>(node.id, row(rows));
                }
                if let Some(node) = node_beta {
                    grads.register::<B>(node.id, row(rows + 1));
                }
                if let Some(node) = node_x {
                    let dx = B::float_slice(all, &[(0..rows).into(), (0..d).into()]);
                    grads.register::<B>(node.id, dx);
                }
            }
        }

        let rows = x.primitive().shape()[0];
        match NormBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let (xs, gs) = (prep.checkpoint(&x), prep.checkpoint(&gamma));
                prep.finish(
                    (xs, gs, eps, centre, rows),
                    B::fused_norm(
                        x.into_primitive(),
                        gamma.into_primitive(),
                        beta.into_primitive(),
                        eps,
                        centre,
                    ),
                )
            }
            OpsKind::UnTracked(prep) => prep.finish(B::fused_norm(
                x.into_primitive(),
                gamma.into_primitive(),
                beta.into_primitive(),
                eps,
                centre,
            )),
        }
    }

    fn fused_norm_backward(
        _x: FloatTensor<Self>,
        _gamma: FloatTensor<Self>,
        _grad: FloatTensor<Self>,
        _eps: f32,
        _centre: bool,
    ) -> FloatTensor<Self> {
        unreachable!("the backward pass runs on the inner backend")
    }
}

#[cfg(test)]
mod tests {
    use burn::nn::{LayerNormConfig, RmsNormConfig};
    use burn::tensor::{Device, Distribution};

    use super::*;

    fn max_diff<const D: usize>(a: Tensor<D>, b: Tensor<D>) -> f32 {
        (a - b).abs().max().into_scalar::<f32>()
    }

    #[test]
    fn fused_norms_and_their_gradients_equal_burns_modules() {
        let device = Device::flex().autodiff();
        for centre in [true, false] {
            let d = 40;
            let x = Tensor::<3>::random([3, 37, d], Distribution::Normal(0.5, 2.0), &device);
            let probe = Tensor::<3>::random([3, 37, d], Distribution::Normal(0.0, 1.0), &device);
            let gamma = Tensor::<1>::random([d], Distribution::Normal(1.0, 0.3), &device);
            let beta = Tensor::<1>::random([d], Distribution::Normal(0.0, 0.3), &device);

            // Burn's module with the same parameters.
            let (reference, params) = if centre {
                let mut ln = LayerNormConfig::new(d).with_epsilon(1e-5).init(&device);
                ln.gamma = ln.gamma.map(|_| gamma.clone().require_grad());
                ln.beta = ln.beta.map(|b| b.map(|_| beta.clone().require_grad()));
                let xr = x.clone().require_grad();
                let y = ln.forward(xr.clone());
                let g = (y.clone() * probe.clone()).sum().backward();
                let dg = ln.gamma.grad(&g).expect("dγ");
                let db = ln.beta.as_ref().expect("β").grad(&g).expect("dβ");
                ((y, xr.grad(&g).expect("dx")), (dg, Some(db)))
            } else {
                let mut rms = RmsNormConfig::new(d).with_epsilon(1e-5).init(&device);
                rms.gamma = rms.gamma.map(|_| gamma.clone().require_grad());
                let xr = x.clone().require_grad();
                let y = rms.forward(xr.clone());
                let g = (y.clone() * probe.clone()).sum().backward();
                (
                    (y, xr.grad(&g).expect("dx")),
                    (rms.gamma.grad(&g).expect("dγ"), None),
                )
            };

            let xf = x.clone().require_grad();
            let gf = gamma.clone().require_grad();
            let bf = beta.clone().require_grad();
            let y = norm(
                xf.clone(),
                gf.clone(),
                centre.then(|| bf.clone()),
                1e-5,
                centre,
            )
            .expect("fused on flex");
            let g = (y.clone() * probe).sum().backward();
            let name = if centre { "LayerNorm" } else { "RMSNorm" };
            assert!(
                max_diff(y.detach(), reference.0.detach()) < 1e-5,
                "{name} forward"
            );
            assert!(
                max_diff(xf.grad(&g).expect("dx"), reference.1) < 1e-4,
                "{name} dx"
            );
            assert!(
                max_diff(gf.grad(&g).expect("dγ"), params.0) < 1e-3,
                "{name} dγ"
            );
            if let Some(db) = params.1 {
                assert!(max_diff(bf.grad(&g).expect("dβ"), db) < 1e-3, "{name} dβ");
            } else {
                assert!(bf.grad(&g).is_none(), "RMSNorm has no shift");
            }
        }
    }
}
