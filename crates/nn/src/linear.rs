//! Linear layers whose products can run with bf16 operands (mixed precision) on the CPU.
//!
//! With [`MatmulPrecision::Bf16`] set for the process ([`set_matmul_precision`], the training
//! commands' `--matmul bf16`), [`linear`] computes `x · W` — and, under autodiff, the backward
//! products `dy · Wᵀ` and `xᵀ · dy` — with both operands rounded to bf16 and f32 sums, on
//! AMX-BF16 tiles or AVX512-BF16 ([`crate::bf16_gemm`]). Weights, biases, gradients and the
//! optimizer's state stay f32: the arithmetic of PyTorch's CPU autocast to bf16 for `Linear`.
//! Everything else (norms, softmax, losses, activations) keeps f32. Other backends, other
//! float types, and CPUs without either instruction set take Burn's f32 product.

use std::sync::atomic::{AtomicU8, Ordering};

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, binary};
use burn::backend::flex::FlexTensor;
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, Dispatch, Flex, backend_extension};
use burn::nn::Linear;
use burn::tensor::{DType, Tensor, TensorData};

use crate::activation::fused_here;
use crate::bf16_gemm::{self, Bf16Kernel, MatRef};
use crate::error::{NnError, Result};

/// The precision of the linear layers' matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatmulPrecision {
    /// f32 operands (Burn's product).
    #[default]
    F32,
    /// bf16 operands, f32 sums (AMX-BF16 or AVX512-BF16).
    Bf16,
}

impl MatmulPrecision {
    /// bf16 where it is measured to pay, on CPUs with AMX-BF16 tiles (2–5x Burn's f32
    /// products at a training step's shapes); f32 elsewhere, including CPUs with AVX512-BF16
    /// alone, whose `VDPBF16PS` has the f32 FMA's peak on Intel (0.5–1.2x measured there).
    pub fn auto() -> Self {
        if bf16_gemm::kernel() == Some(Bf16Kernel::Amx) {
            Self::Bf16
        } else {
            Self::F32
        }
    }
}

/// `f32`, `bf16`, or `auto` ([`MatmulPrecision::auto`], resolved when parsed).
impl std::str::FromStr for MatmulPrecision {
    type Err = NnError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "f32" => Ok(Self::F32),
            "bf16" => Ok(Self::Bf16),
            "auto" => Ok(Self::auto()),
            other => Err(NnError::Precision {
                detail: format!("matmul precision must be f32, bf16 or auto, not {other:?}"),
            }),
        }
    }
}

impl std::fmt::Display for MatmulPrecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
        })
    }
}

static PRECISION: AtomicU8 = AtomicU8::new(0);

/// Sets the precision of [`linear`]'s products for the whole process. bf16 needs a CPU with
/// AMX-BF16 or AVX512-BF16; on any other the error says so and nothing changes.
pub fn set_matmul_precision(precision: MatmulPrecision) -> Result<()> {
    if precision == MatmulPrecision::Bf16 && bf16_gemm::kernel().is_none() {
        return Err(NnError::Precision {
            detail: "bf16 matmuls need a CPU with AMX-BF16 or AVX512-BF16; this one has \
                     neither (train with --matmul f32)"
                .into(),
        });
    }
    PRECISION.store(precision as u8, Ordering::Relaxed);
    Ok(())
}

/// The precision [`linear`] uses now.
pub fn matmul_precision() -> MatmulPrecision {
    match PRECISION.load(Ordering::Relaxed) {
        1 => MatmulPrecision::Bf16,
        _ => MatmulPrecision::F32,
    }
}

/// The bf16 product; implemented for flex and for autodiff over it.
#[backend_extension(Flex, Autodiff)]
pub trait Bf16Matmul: Backend {
    /// `a · b` with both operands rounded to bf16 and f32 sums.
    ///
    /// # Shapes
    /// - `a`: `[m, k]`, `b`: `[k, n]`; output: `[m, n]`
    fn bf16_matmul(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self>;
}

/// `x · W + b` of a Burn [`Linear`] layer, with bf16 products when the process asked for them
/// ([`set_matmul_precision`]) and `x` is f32 on the CPU backend; Burn's `Linear::forward`
/// otherwise.
///
/// # Shapes
/// - `x`: `[..., d_input]`; output: `[..., d_output]`
pub fn linear<const D: usize>(layer: &Linear, x: Tensor<D>) -> Tensor<D> {
    if matmul_precision() != MatmulPrecision::Bf16 || !fused_here(&x) {
        return layer.forward(x);
    }
    let dims = x.dims();
    let [d_input, d_output] = layer.weight.dims();
    assert_eq!(
        dims[D - 1],
        d_input,
        "linear: input's last dimension is not the layer's d_input"
    );
    let rows = dims[..D - 1].iter().product::<usize>();
    let x = x.reshape([rows, d_input]);
    let y = Tensor::<2>::from_dispatch(<Dispatch as Bf16Matmul>::bf16_matmul(
        x.into_dispatch(),
        layer.weight.val().into_dispatch(),
    ));
    let y = match &layer.bias {
        Some(bias) => y + bias.val().unsqueeze::<2>(),
        None => y,
    };
    let mut out = dims;
    out[D - 1] = d_output;
    y.reshape(out)
}

impl Bf16Matmul for Flex {
    fn bf16_matmul(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        let Some(kernel) = bf16_gemm::kernel() else {
            return Flex::float_matmul(a, b);
        };
        match product(&a, &b, kernel) {
            Some(out) => out,
            None => Flex::float_matmul(a, b),
        }
    }
}

/// The bf16 product of two 2-D f32 flex tensors, or `None` for any other input.
fn product(a: &FlexTensor, b: &FlexTensor, kernel: Bf16Kernel) -> Option<FlexTensor> {
    let (va, vb) = (view(a)?, view(b)?);
    if va.cols() != vb.rows() {
        return None;
    }
    let (m, n) = (va.rows(), vb.cols());
    let out = bf16_gemm::matmul(va, vb, kernel);
    Some(FlexTensor::from_data(TensorData::new(out, [m, n])))
}

/// A 2-D f32 flex tensor with non-negative strides as a [`MatRef`].
fn view(t: &FlexTensor) -> Option<MatRef<'_>> {
    if t.dtype() != DType::F32 {
        return None;
    }
    let (rows, cols, rs, cs) = t.layout().as_2d_strides()?;
    let rs = usize::try_from(rs).ok()?;
    let cs = usize::try_from(cs).ok()?;
    MatRef::new(
        t.storage::<f32>(),
        (rows, cols),
        t.layout().start_offset(),
        (rs, cs),
    )
}

impl<B: Backend + Bf16Matmul, C: CheckpointStrategy> Bf16Matmul for Autodiff<B, C> {
    fn bf16_matmul(a: FloatTensor<Self>, b: FloatTensor<Self>) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct MatmulBackward;

        impl<B: Backend + Bf16Matmul> Backward<B, 2> for MatmulBackward {
            type State = (Option<NodeId>, Option<NodeId>);

            fn backward(
                self,
                ops: Ops<Self::State, 2>,
                grads: &mut Gradients,
                checkpointer: &mut Checkpointer,
            ) {
                let (a, b) = ops.state;
                let a = a.map(|a| checkpointer.retrieve_node_output(a));
                let b = b.map(|b| checkpointer.retrieve_node_output(b));
                binary::<B, _, _>(
                    ops.parents,
                    ops.node,
                    grads,
                    // The state holds `b` whenever `a` is tracked, and `a` whenever `b` is.
                    |grad| B::bf16_matmul(grad, B::float_transpose(b.expect("b kept for da"))),
                    |grad| B::bf16_matmul(B::float_transpose(a.expect("a kept for db")), grad),
                );
            }
        }

        let (a_tracked, b_tracked) = (a.is_tracked(), b.is_tracked());
        match MatmulBackward
            .prepare::<C>([a.node(), b.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let a_state = b_tracked.then(|| prep.checkpoint(&a));
                let b_state = a_tracked.then(|| prep.checkpoint(&b));
                prep.finish(
                    (a_state, b_state),
                    B::bf16_matmul(a.into_primitive(), b.into_primitive()),
                )
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::bf16_matmul(a.into_primitive(), b.into_primitive()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::LinearConfig;
    use burn::tensor::{Device, Distribution};

    /// Serialises the tests that switch the process-wide precision.
    static SWITCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn rounded(t: Tensor<3>) -> Tensor<3> {
        // bf16 rounding through the same conversion the kernels use.
        let dims = t.dims();
        let values: Vec<f32> = t
            .into_data()
            .try_to_vec::<f32>()
            .expect("f32")
            .into_iter()
            .map(|v| bf16_gemm::bf16_to_f32(bf16_gemm::f32_to_bf16(v)))
            .collect();
        Tensor::from_data(TensorData::new(values, dims), &Device::flex().autodiff())
    }

    #[test]
    fn bf16_linear_and_its_gradients_equal_the_f32_product_of_rounded_operands() {
        if bf16_gemm::kernel().is_none() {
            eprintln!("skipped: this CPU has neither AMX-BF16 nor AVX512-BF16");
            return;
        }
        let _guard = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
        let device = Device::flex().autodiff();
        let layer = LinearConfig::new(70, 45).init(&device);
        let x = Tensor::<3>::random([3, 11, 70], Distribution::Normal(0.0, 1.0), &device)
            .require_grad();
        let probe = Tensor::<3>::random([3, 11, 45], Distribution::Normal(0.0, 1.0), &device);

        set_matmul_precision(MatmulPrecision::Bf16).expect("bf16 available");
        let y = linear(&layer, x.clone());
        let grads = (y.clone() * probe.clone()).sum().backward();
        let (dx, dw) = (
            x.grad(&grads).expect("dx"),
            layer.weight.grad(&grads).expect("dw"),
        );
        set_matmul_precision(MatmulPrecision::F32).expect("f32");

        // Reference: f32 products of the bf16-rounded operands (the gradient products round
        // their own operands: dy, W for dx; x, dy for dw).
        let w = layer.weight.val().detach();
        let xr = rounded(x.clone().detach());
        let wr = rounded(w.clone().unsqueeze::<3>()).squeeze::<2>();
        let want_y = xr.clone().matmul(wr.clone().unsqueeze())
            + layer.bias.as_ref().expect("bias").val().unsqueeze();
        let diff = (y.clone().detach() - want_y)
            .abs()
            .max()
            .into_scalar::<f32>();
        assert!(diff < 1e-4, "forward {diff}");
        let pr = rounded(probe.clone());
        let want_dx = pr.clone().matmul(wr.transpose().unsqueeze());
        let diff = (dx - want_dx.inner()).abs().max().into_scalar::<f32>();
        assert!(diff < 1e-4, "dx {diff}");
        let want_dw = xr
            .reshape([33, 70])
            .transpose()
            .matmul(pr.reshape([33, 45]));
        let diff = (dw - want_dw.inner()).abs().max().into_scalar::<f32>();
        assert!(diff < 1e-3, "dw {diff}");

        // bf16 rounding moves the output away from the f32 product; with f32 restored,
        // `linear` is Burn's product again.
        let bf16_y = y.detach();
        let f32_y = layer.forward(x.clone().detach());
        let moved = (bf16_y - f32_y.clone()).abs().max().into_scalar::<f32>();
        assert!(moved > 1e-4, "bf16 output equals the f32 one ({moved})");
        let restored = (linear(&layer, x.detach()) - f32_y)
            .abs()
            .max()
            .into_scalar::<f32>();
        assert_eq!(restored, 0.0, "f32 precision restored gives Burn's product");
    }

    #[test]
    fn precision_parses_and_refuses_unknown_names() {
        assert_eq!(
            "bf16".parse::<MatmulPrecision>().ok(),
            Some(MatmulPrecision::Bf16)
        );
        assert_eq!(
            "f32".parse::<MatmulPrecision>().ok(),
            Some(MatmulPrecision::F32)
        );
        assert!("fp8".parse::<MatmulPrecision>().is_err());
    }
}
