//! Module visitors: parameter paths and ids, gradient norms, scaling and accumulation.
//!
//! Paths are built exactly as Burn's `ModuleOptimizer` builds them (module names joined by `.`),
//! so the same regexes select parameters here and in `ParamGroup`.

use std::collections::BTreeMap;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamGroup, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use crate::error::{Result, TrainError};

/// Builds a [`ParamGroup`] of the parameters matching any of the regexes (empty: all parameters).
pub(crate) fn param_group(patterns: &[String]) -> Result<ParamGroup> {
    if patterns.is_empty() {
        return Ok(ParamGroup::all());
    }
    ParamGroup::from_any_regexes(patterns.to_vec()).map_err(|e| TrainError::ParamPattern {
        pattern: patterns.join(" | "),
        message: format!("{e:?}"),
    })
}

/// Every float parameter as (path, id, trainable).
pub fn param_paths<M: Module>(model: &M) -> Vec<(String, ParamId, bool)> {
    struct Paths {
        path: Vec<String>,
        out: Vec<(String, ParamId, bool)>,
    }
    impl ModuleVisitor for Paths {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let trainable = param.val().is_require_grad();
            self.out.push((self.path.join("."), param.id, trainable));
        }
    }
    let mut visitor = Paths {
        path: Vec::new(),
        out: Vec::new(),
    };
    model.visit(&mut visitor);
    visitor.out
}

/// Ids of the trainable parameters selected by `group`.
pub(crate) fn select_params<M: Module>(model: &M, group: &ParamGroup) -> Vec<ParamId> {
    param_paths(model)
        .into_iter()
        .filter(|(path, id, trainable)| *trainable && group.matches(id, Some(path)))
        .map(|(_, id, _)| id)
        .collect()
}

/// Gives each parameter the id recorded for its path (optimizer state is keyed by id and
/// safetensors stores no ids). Returns the paths that had no recorded id.
pub(crate) fn assign_ids<M: Module>(model: M, ids: &BTreeMap<String, u64>) -> (M, Vec<String>) {
    struct Assign<'a> {
        path: Vec<String>,
        ids: &'a BTreeMap<String, u64>,
        missing: Vec<String>,
    }
    impl ModuleMapper for Assign<'_> {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (id, tensor, mapper) = param.consume();
            let key = self.path.join(".");
            let id = match self.ids.get(&key) {
                Some(saved) => ParamId::from(*saved),
                None => {
                    self.missing.push(key);
                    id
                }
            };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    let mut mapper = Assign {
        path: Vec::new(),
        ids,
        missing: Vec::new(),
    };
    let model = model.map(&mut mapper);
    (model, mapper.missing)
}

/// Squared L2 norm over all gradients of `model` in `grads` (one device sync).
pub(crate) fn grad_sq_norm<M: Module>(model: &M, grads: &GradientsParams) -> f64 {
    struct SumSquares<'a> {
        grads: &'a GradientsParams,
        total: Option<Tensor<1>>,
    }
    impl ModuleVisitor for SumSquares<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.get::<D>(param.id) {
                let sq = grad.square().sum();
                self.total = Some(match self.total.take() {
                    Some(total) => total.add(sq),
                    None => sq,
                });
            }
        }
    }
    let mut visitor = SumSquares { grads, total: None };
    model.visit(&mut visitor);
    visitor
        .total
        .map_or(0.0, |t| f64::from(t.into_scalar::<f32>()))
}

/// Multiplies every gradient of `model` in `grads` by `factor`.
pub(crate) fn scale_grads<M: Module>(model: &M, grads: &mut GradientsParams, factor: f64) {
    struct Scale<'a> {
        grads: &'a mut GradientsParams,
        factor: f64,
    }
    impl ModuleVisitor for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.remove::<D>(param.id) {
                self.grads.register(param.id, grad.mul_scalar(self.factor));
            }
        }
    }
    model.visit(&mut Scale { grads, factor });
}

/// Adds `new` into `acc`, gradient by gradient.
pub(crate) fn add_grads<M: Module>(model: &M, acc: &mut GradientsParams, mut new: GradientsParams) {
    struct Add<'a> {
        acc: &'a mut GradientsParams,
        new: &'a mut GradientsParams,
    }
    impl ModuleVisitor for Add<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.new.remove::<D>(param.id) {
                let sum = match self.acc.remove::<D>(param.id) {
                    Some(old) => old.add(grad),
                    None => grad,
                };
                self.acc.register(param.id, sum);
            }
        }
    }
    model.visit(&mut Add { acc, new: &mut new });
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::{Device, TensorData};

    #[derive(Module, Debug)]
    struct Two {
        a: Linear,
        b: Linear,
    }

    fn grads_of(model: &Two, weight_a: f32, weight_b: f32, device: &Device) -> GradientsParams {
        let mut grads = GradientsParams::new();
        grads.register(
            model.a.weight.id,
            Tensor::<2>::full([2, 3], weight_a, device),
        );
        grads.register(
            model.b.weight.id,
            Tensor::<2>::full([3, 1], weight_b, device),
        );
        grads
    }

    #[test]
    fn global_norm_spans_all_tensors_and_scaling_applies_to_each() {
        let device = Device::flex();
        let model = Two {
            a: LinearConfig::new(2, 3).init(&device),
            b: LinearConfig::new(3, 1).init(&device),
        };
        let mut grads = grads_of(&model, 1.0, 2.0, &device);
        // 6 · 1² + 3 · 2² = 18
        assert_eq!(grad_sq_norm(&model, &grads), 18.0);
        scale_grads(&model, &mut grads, 0.5);
        assert_eq!(grad_sq_norm(&model, &grads), 4.5);
        let b: Tensor<2> = grads.get(model.b.weight.id).expect("b grad");
        assert_eq!(b.into_data(), TensorData::from([[1.0f32], [1.0], [1.0]]));

        add_grads(&model, &mut grads, grads_of(&model, 1.0, 1.0, &device));
        // a: 0.5 + 1 = 1.5 (6 entries), b: 1 + 1 = 2 (3 entries)
        assert_eq!(grad_sq_norm(&model, &grads), 6.0 * 2.25 + 3.0 * 4.0);
        assert_eq!(grad_sq_norm(&model, &GradientsParams::new()), 0.0);
    }

    #[test]
    fn ids_are_reassigned_by_path() {
        let device = Device::flex();
        let model = Two {
            a: LinearConfig::new(2, 3).init(&device),
            b: LinearConfig::new(3, 1).init(&device),
        };
        let ids: BTreeMap<String, u64> = param_paths(&model)
            .into_iter()
            .enumerate()
            .map(|(i, (path, _, _))| (path, 1000 + i as u64))
            .collect();
        let (model, missing) = assign_ids(model, &ids);
        assert!(missing.is_empty());
        for (path, id, _) in param_paths(&model) {
            assert_eq!(ids[&path], id.val(), "{path}");
        }
        let partial: BTreeMap<String, u64> = ids.into_iter().take(1).collect();
        let (_, missing) = assign_ids(model, &partial);
        // The map kept `a.bias` (sorted first); the rest are reported in visiting order.
        assert_eq!(missing, ["a.weight", "b.weight", "b.bias"]);
    }
}
