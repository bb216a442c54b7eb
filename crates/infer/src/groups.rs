//! Acoustic similarity groups (PCG: Yanuka et al., "Principled Coarse-Grained Acceptance for
//! Speculative Decoding in Speech", §2.1–2.2).
//!
//! Each token `t` spans a group `G(t) = {t' : cos(E_t, E_t') > θ}` over the target model's token
//! embedding table `E` (`[V, D]`). Groups overlap; identical groups are stored once, so there are
//! `M ≤ V` distinct groups `G_k`. A token belongs to `N(t) ≥ 1` groups (its own at least) and its
//! probability mass is split equally over them (`w_{k,t} = 1 / N(t)`), which turns any token
//! distribution `p` into a group distribution `P_c(G_k) = Σ_{t ∈ G_k} p(t) / N(t)` summing to 1.
//!
//! Storage is CSR twice over:
//!
//! ```text
//! offsets [M + 1]   members [nnz]          group k = members[offsets[k] .. offsets[k + 1]]
//! token_offsets [V + 1]  token_groups [nnz]  groups of token t (derived from the above)
//! ```
//!
//! Saved as safetensors: `offsets` (U32 `[M + 1]`), `members` (U32 `[nnz]`), header metadata
//! `format = voxspec-groups`, `version = 1`, `vocab`, `theta`.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::error::{InferError, Result};

/// Value of the `format` metadata key of a groups file.
pub const GROUPS_FORMAT: &str = "voxspec-groups";
/// Value of the `version` metadata key of a groups file.
pub const GROUPS_VERSION: &str = "1";

/// Size statistics of a set of groups (what `voxspec groups build` reports and the θ sweep
/// of the benchmark tabulates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupSummary {
    /// The cosine threshold.
    pub theta: f32,
    /// Distinct groups `M`.
    pub n_groups: usize,
    /// Mean members per group.
    pub mean_group_size: f64,
    /// Largest group.
    pub max_group_size: usize,
    /// Mean groups per token, `mean N(t)`.
    pub mean_memberships: f64,
}

/// Builds groups at each threshold of `thetas` and summarises them (a θ sweep).
///
/// # Errors
/// As [`SimilarityGroups::from_embeddings`].
pub fn sweep_theta(
    embeddings: &[f32],
    vocab: usize,
    dim: usize,
    thetas: &[f32],
) -> Result<Vec<GroupSummary>> {
    thetas
        .iter()
        .map(|&theta| {
            SimilarityGroups::from_embeddings(embeddings, vocab, dim, theta).map(|g| g.summary())
        })
        .collect()
}

/// Builds the groups whose mean size (members per distinct group) is closest to `target`:
/// a bisection over θ, since lowering θ never shrinks a group. The paper's ablation reports
/// mean sizes of 4.5 and 10.3; a fixed θ does not carry over between models (the embeddings of
/// a small, briefly trained model are close to random, with no cosine above 0.3, so θ ≥ 0.3
/// gives only singletons there and PCG reduces to exact speculative sampling).
///
/// Cost: about 24 builds, each `O(V² D)` (see [`SimilarityGroups::from_embeddings`]).
///
/// # Errors
/// [`InferError::InvalidSetting`] for `target` outside `[1, vocab]` (or not finite), and as
/// [`SimilarityGroups::from_embeddings`].
pub fn groups_of_mean_size(
    embeddings: &[f32],
    vocab: usize,
    dim: usize,
    target: f64,
) -> Result<SimilarityGroups> {
    if !(target.is_finite() && target >= 1.0 && target <= vocab as f64) {
        return Err(InferError::InvalidSetting {
            name: "mean group size",
            value: target.to_string(),
            expected: format!("a size in [1, {vocab}] (the vocabulary)"),
        });
    }
    let build = |theta: f32| SimilarityGroups::from_embeddings(embeddings, vocab, dim, theta);
    // `low` is a θ whose groups are at least `target` on average, `high` one whose are below.
    let mut low = build(-0.999)?;
    if low.mean_group_size() <= target {
        return Ok(low);
    }
    let mut high = build(0.999)?;
    if high.mean_group_size() >= target {
        return Ok(high);
    }
    for _ in 0..24 {
        let mid = build(0.5 * (low.theta() + high.theta()))?;
        if mid.mean_group_size() >= target {
            low = mid;
        } else {
            high = mid;
        }
        if high.theta() - low.theta() < 1e-4 {
            break;
        }
    }
    let miss = |g: &SimilarityGroups| (g.mean_group_size() - target).abs();
    Ok(if miss(&low) <= miss(&high) { low } else { high })
}

/// Overlapping token groups with equal-split weights, in CSR form. Immutable once built.
#[derive(Debug, Clone, PartialEq)]
pub struct SimilarityGroups {
    vocab: usize,
    theta: f32,
    offsets: Vec<u32>,
    members: Vec<u32>,
    token_offsets: Vec<u32>,
    token_groups: Vec<u32>,
}

impl SimilarityGroups {
    /// Builds the groups of an embedding table `embeddings` (`[vocab, dim]` row-major) at
    /// threshold `theta`: `t'` joins `G(t)` when the cosine of their rows exceeds `theta`, and
    /// `t` is always in `G(t)` (a zero row has only itself). Groups are numbered in order of the
    /// first token that spans them; members are sorted.
    ///
    /// Cost `O(V² D)` on one core: measured 0.13 s for `V = 1024, D = 256` and 2.6 s for
    /// `V = 4096, D = 512` here; a 65k vocabulary would need a blocked or parallel search.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for `theta` outside (−1, 1), `dim = 0`, a table whose
    /// length is not `vocab · dim`, or a non-finite entry.
    pub fn from_embeddings(
        embeddings: &[f32],
        vocab: usize,
        dim: usize,
        theta: f32,
    ) -> Result<Self> {
        check_theta(theta)?;
        if vocab == 0 || dim == 0 || embeddings.len() != vocab * dim {
            return Err(InferError::InvalidSetting {
                name: "embeddings",
                value: format!("{} values for [vocab {vocab}, dim {dim}]", embeddings.len()),
                expected: "a non-empty [vocab, dim] table".into(),
            });
        }
        if let Some(i) = embeddings.iter().position(|v| !v.is_finite()) {
            return Err(InferError::InvalidSetting {
                name: "embeddings",
                value: format!("{} at row {} column {}", embeddings[i], i / dim, i % dim),
                expected: "finite values".into(),
            });
        }
        // Unit rows (a zero row stays zero and matches nothing but itself).
        let mut unit = embeddings.to_vec();
        for row in unit.chunks_exact_mut(dim) {
            let norm = row
                .iter()
                .map(|v| f64::from(*v).powi(2))
                .sum::<f64>()
                .sqrt();
            if norm > 0.0 {
                for v in row.iter_mut() {
                    *v = (f64::from(*v) / norm) as f32;
                }
            }
        }
        let mut lists: Vec<Vec<u32>> = Vec::new();
        let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut members = Vec::with_capacity(vocab);
        for t in 0..vocab {
            let row = &unit[t * dim..(t + 1) * dim];
            members.clear();
            for (u, other) in unit.chunks_exact(dim).enumerate() {
                if u == t || dot(row, other) > theta {
                    members.push(u as u32);
                }
            }
            if !index.contains_key(&members) {
                index.insert(members.clone(), lists.len() as u32);
                lists.push(members.clone());
            }
        }
        Self::from_lists(vocab, theta, &lists)
    }

    /// Groups from explicit member lists (tests, other group constructions).
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for `theta` outside (−1, 1), an empty group, a member
    /// outside the vocabulary, a repeated member, or a token in no group.
    pub fn from_lists(vocab: usize, theta: f32, groups: &[Vec<u32>]) -> Result<Self> {
        let mut offsets = Vec::with_capacity(groups.len() + 1);
        let mut members = Vec::new();
        offsets.push(0u32);
        for group in groups {
            let mut sorted = group.clone();
            sorted.sort_unstable();
            members.extend_from_slice(&sorted);
            offsets.push(members.len() as u32);
        }
        Self::from_csr(vocab, theta, offsets, members)
    }

    /// Groups from CSR arrays: group `k` is `members[offsets[k]..offsets[k + 1]]`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming the array at fault (see [`Self::from_lists`]).
    pub fn from_csr(
        vocab: usize,
        theta: f32,
        offsets: Vec<u32>,
        members: Vec<u32>,
    ) -> Result<Self> {
        check_theta(theta)?;
        let bad = |name, value: String, expected: &str| InferError::InvalidSetting {
            name,
            value,
            expected: expected.into(),
        };
        if vocab == 0 || vocab > u32::MAX as usize {
            return Err(bad("vocab", vocab.to_string(), "in 1..2^32"));
        }
        if offsets.len() < 2
            || offsets[0] != 0
            || offsets.last().map(|&o| o as usize) != Some(members.len())
        {
            return Err(bad(
                "offsets",
                format!("{} offsets for {} members", offsets.len(), members.len()),
                "at least one group, starting at 0 and ending at the member count",
            ));
        }
        let mut count = vec![0u32; vocab];
        for (k, w) in offsets.windows(2).enumerate() {
            if w[1] <= w[0] {
                return Err(bad(
                    "offsets",
                    format!("group {k} is empty"),
                    "non-empty groups",
                ));
            }
            let group = &members[w[0] as usize..w[1] as usize];
            for (i, &t) in group.iter().enumerate() {
                if t as usize >= vocab {
                    return Err(bad(
                        "members",
                        format!("token {t} in group {k}"),
                        &format!("tokens below vocab = {vocab}"),
                    ));
                }
                if i > 0 && group[i - 1] >= t {
                    return Err(bad(
                        "members",
                        format!("group {k} lists {} before {t}", group[i - 1]),
                        "strictly increasing members",
                    ));
                }
                count[t as usize] += 1;
            }
        }
        if let Some(t) = count.iter().position(|&c| c == 0) {
            return Err(bad(
                "members",
                format!("token {t} is in no group"),
                "every token in a group",
            ));
        }
        // Reverse index: groups of each token, in increasing group order.
        let mut token_offsets = Vec::with_capacity(vocab + 1);
        token_offsets.push(0u32);
        for &c in &count {
            let last = token_offsets[token_offsets.len() - 1];
            token_offsets.push(last + c);
        }
        let mut fill: Vec<u32> = token_offsets[..vocab].to_vec();
        let mut token_groups = vec![0u32; members.len()];
        for (k, w) in offsets.windows(2).enumerate() {
            for &t in &members[w[0] as usize..w[1] as usize] {
                token_groups[fill[t as usize] as usize] = k as u32;
                fill[t as usize] += 1;
            }
        }
        Ok(Self {
            vocab,
            theta,
            offsets,
            members,
            token_offsets,
            token_groups,
        })
    }

    /// Vocabulary size `V`.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The cosine threshold the groups were built with.
    pub fn theta(&self) -> f32 {
        self.theta
    }

    /// Number of distinct groups `M`.
    pub fn n_groups(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Members of group `k`, sorted (empty for `k ≥ M`).
    pub fn members(&self, k: usize) -> &[u32] {
        match (self.offsets.get(k), self.offsets.get(k + 1)) {
            (Some(&a), Some(&b)) => &self.members[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Groups containing token `t`, `S(t)` (empty for `t ≥ V`).
    pub fn groups_of(&self, t: u32) -> &[u32] {
        let t = t as usize;
        match (self.token_offsets.get(t), self.token_offsets.get(t + 1)) {
            (Some(&a), Some(&b)) => &self.token_groups[a as usize..b as usize],
            _ => &[],
        }
    }

    /// `N(t)`, the number of groups containing token `t`.
    pub fn n_memberships(&self, t: u32) -> usize {
        self.groups_of(t).len()
    }

    /// Equal-split weight `w_{k,t} = 1 / N(t)` of token `t` in each of its groups.
    pub fn weight(&self, t: u32) -> f64 {
        1.0 / self.n_memberships(t).max(1) as f64
    }

    /// The CSR arrays `(offsets, members)`.
    pub fn csr(&self) -> (&[u32], &[u32]) {
        (&self.offsets, &self.members)
    }

    /// Mean number of members per distinct group.
    pub fn mean_group_size(&self) -> f64 {
        self.members.len() as f64 / self.n_groups() as f64
    }

    /// Largest group.
    pub fn max_group_size(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// Mean `N(t)` over the vocabulary (1 when groups do not overlap).
    pub fn mean_memberships(&self) -> f64 {
        self.members.len() as f64 / self.vocab as f64
    }

    /// Size statistics.
    pub fn summary(&self) -> GroupSummary {
        GroupSummary {
            theta: self.theta,
            n_groups: self.n_groups(),
            mean_group_size: self.mean_group_size(),
            max_group_size: self.max_group_size(),
            mean_memberships: self.mean_memberships(),
        }
    }

    /// Coarse mass of group `k` under a token distribution: `Σ_{t ∈ G_k} probs[t] / N(t)`.
    /// Tokens past the end of `probs` count as 0.
    pub fn coarse_mass(&self, k: usize, probs: &[f32]) -> f64 {
        self.members(k)
            .iter()
            .map(|&t| probs.get(t as usize).map_or(0.0, |&p| f64::from(p)) * self.weight(t))
            .sum()
    }

    /// The whole coarse distribution `[M]` of a token distribution (sums to `Σ probs`).
    pub fn coarse_distribution(&self, probs: &[f32]) -> Vec<f64> {
        (0..self.n_groups())
            .map(|k| self.coarse_mass(k, probs))
            .collect()
    }

    /// Writes the groups to `path` as safetensors (see the module doc for the layout).
    ///
    /// # Errors
    /// [`InferError::File`] when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        let format_err = |detail: String| InferError::File {
            path: path.display().to_string(),
            detail,
        };
        let offsets: Vec<u8> = self.offsets.iter().flat_map(|v| v.to_le_bytes()).collect();
        let members: Vec<u8> = self.members.iter().flat_map(|v| v.to_le_bytes()).collect();
        let views = [
            (
                "offsets",
                TensorView::new(Dtype::U32, vec![self.offsets.len()], &offsets)
                    .map_err(|e| format_err(e.to_string()))?,
            ),
            (
                "members",
                TensorView::new(Dtype::U32, vec![self.members.len()], &members)
                    .map_err(|e| format_err(e.to_string()))?,
            ),
        ];
        let metadata: HashMap<String, String> = [
            ("format", GROUPS_FORMAT.to_string()),
            ("version", GROUPS_VERSION.to_string()),
            ("vocab", self.vocab.to_string()),
            ("theta", self.theta.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let bytes =
            safetensors::serialize(views, Some(metadata)).map_err(|e| format_err(e.to_string()))?;
        std::fs::write(path, bytes).map_err(|e| InferError::File {
            path: path.display().to_string(),
            detail: format!("cannot write: {e}"),
        })
    }

    /// Reads groups written by [`Self::save`].
    ///
    /// # Errors
    /// [`InferError::File`] naming the path and what is unreadable, missing or wrong (tensor,
    /// metadata key, or the CSR check that failed).
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| InferError::File {
            path: path.display().to_string(),
            detail: format!("cannot read: {e}"),
        })?;
        let format_err = |detail: String| InferError::File {
            path: path.display().to_string(),
            detail,
        };
        let (_, header) = SafeTensors::read_metadata(&bytes)
            .map_err(|e| format_err(format!("not a safetensors file: {e}")))?;
        let tensors = SafeTensors::deserialize(&bytes)
            .map_err(|e| format_err(format!("not a safetensors file: {e}")))?;
        let meta = header.metadata().clone().unwrap_or_default();
        let key = |name: &str| {
            meta.get(name)
                .cloned()
                .ok_or_else(|| format_err(format!("metadata key `{name}` missing")))
        };
        let format = key("format")?;
        if format != GROUPS_FORMAT {
            return Err(format_err(format!(
                "metadata format = `{format}`, expected `{GROUPS_FORMAT}`"
            )));
        }
        let version = key("version")?;
        if version != GROUPS_VERSION {
            return Err(format_err(format!(
                "metadata version = `{version}`, expected `{GROUPS_VERSION}`"
            )));
        }
        let vocab: usize = key("vocab")?
            .parse()
            .map_err(|e| format_err(format!("metadata vocab: {e}")))?;
        let theta: f32 = key("theta")?
            .parse()
            .map_err(|e| format_err(format!("metadata theta: {e}")))?;
        let read = |name: &str| -> Result<Vec<u32>> {
            let view = tensors
                .tensor(name)
                .map_err(|_| format_err(format!("tensor `{name}` missing")))?;
            if view.dtype() != Dtype::U32 || view.shape().len() != 1 {
                return Err(format_err(format!(
                    "tensor `{name}` is {:?} {:?}, expected U32 of rank 1",
                    view.dtype(),
                    view.shape()
                )));
            }
            Ok(view
                .data()
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect())
        };
        let offsets = read("offsets")?;
        let members = read("members")?;
        Self::from_csr(vocab, theta, offsets, members).map_err(|e| format_err(e.to_string()))
    }
}

/// Reads an embedding table (F32, `[vocab, dim]`) named `tensor` from a safetensors file, e.g.
/// the target's token embedding in a checkpoint's `model.safetensors`. Returns
/// `(values, vocab, dim)` ready for [`SimilarityGroups::from_embeddings`].
///
/// # Errors
/// [`InferError::File`] when unreadable, or naming the tensor when it is missing, not F32 or not
/// of rank 2 (the available names are listed when missing).
pub fn read_embedding_table(path: &Path, tensor: &str) -> Result<(Vec<f32>, usize, usize)> {
    let bytes = std::fs::read(path).map_err(|e| InferError::File {
        path: path.display().to_string(),
        detail: format!("cannot read: {e}"),
    })?;
    let format_err = |detail: String| InferError::File {
        path: path.display().to_string(),
        detail,
    };
    let tensors = SafeTensors::deserialize(&bytes)
        .map_err(|e| format_err(format!("not a safetensors file: {e}")))?;
    let view = tensors.tensor(tensor).map_err(|_| {
        let mut names = tensors.names();
        names.sort_unstable();
        format_err(format!(
            "no tensor `{tensor}` (tensors: {})",
            names.join(", ")
        ))
    })?;
    match (view.dtype(), view.shape()) {
        (Dtype::F32, &[vocab, dim]) if vocab > 0 && dim > 0 => {
            let values = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            Ok((values, vocab, dim))
        }
        (dtype, shape) => Err(format_err(format!(
            "tensor `{tensor}` is {dtype:?} {shape:?}, expected F32 [vocab, dim]"
        ))),
    }
}

fn check_theta(theta: f32) -> Result<()> {
    if theta > -1.0 && theta < 1.0 {
        Ok(())
    } else {
        Err(InferError::InvalidSetting {
            name: "theta",
            value: theta.to_string(),
            expected: "in (-1, 1)".into(),
        })
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent partial sums let the compiler vectorise the loop.
    let mut acc = [0.0f32; 8];
    let (a8, a_rest) = a.split_at(a.len() - a.len() % 8);
    let (b8, b_rest) = b.split_at(a8.len());
    for (x, y) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four tokens on the plane: 0 and 1 close, 2 between 1 and 3, 3 apart.
    fn plane() -> Vec<f32> {
        let angle = |deg: f32| {
            let r = deg.to_radians();
            [r.cos(), r.sin()]
        };
        [0.0, 20.0, 50.0, 90.0]
            .iter()
            .flat_map(|&d| angle(d))
            .collect()
    }

    #[test]
    fn groups_follow_the_cosine_threshold() {
        // cos 20° = 0.94, cos 30° = 0.87, cos 40° = 0.77, cos 50° = 0.64
        let g = SimilarityGroups::from_embeddings(&plane(), 4, 2, 0.8).unwrap();
        // G(0) = {0,1}, G(1) = {0,1,2}, G(2) = {1,2}, G(3) = {3}: all distinct
        assert_eq!(g.n_groups(), 4);
        assert_eq!(g.members(0), &[0, 1]);
        assert_eq!(g.members(1), &[0, 1, 2]);
        assert_eq!(g.members(2), &[1, 2]);
        assert_eq!(g.members(3), &[3]);
        assert_eq!(g.groups_of(1), &[0, 1, 2]);
        assert_eq!(g.n_memberships(3), 1);
        assert_eq!(g.max_group_size(), 3);
        assert!((g.mean_group_size() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn identical_groups_are_stored_once_and_every_token_has_its_own() {
        // θ just under 1: only exact duplicates group; tokens 0 and 2 share a direction.
        let emb = [1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0];
        let g = SimilarityGroups::from_embeddings(&emb, 4, 2, 0.999).unwrap();
        assert_eq!(g.n_groups(), 3);
        assert_eq!(g.members(0), &[0, 2]);
        assert_eq!(g.members(1), &[1]);
        assert_eq!(g.members(2), &[3], "a zero row is its own group");
        // θ near −1: everything with a direction is in one group.
        let g = SimilarityGroups::from_embeddings(&plane(), 4, 2, -0.99).unwrap();
        assert_eq!(g.n_groups(), 1);
        assert_eq!(g.members(0), &[0, 1, 2, 3]);
    }

    #[test]
    fn lower_thresholds_give_larger_groups() {
        let sweep = sweep_theta(&plane(), 4, 2, &[0.95, 0.8, 0.5, -0.5]).unwrap();
        let means: Vec<f64> = sweep.iter().map(|s| s.mean_group_size).collect();
        assert!(means.windows(2).all(|w| w[0] <= w[1]), "{means:?}");
        assert_eq!(sweep[0].max_group_size, 1);
        assert_eq!(sweep[3].n_groups, 1);
        assert!((sweep[1].mean_memberships - 2.0).abs() < 1e-12);
    }

    #[test]
    fn groups_are_built_to_a_target_mean_size() {
        // 64 random directions in 16 dimensions: cosines spread around 0 (std ≈ 0.25).
        let mut state = 0x9e37_79b9u32;
        let emb: Vec<f32> = (0..64 * 16)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as f32 / u32::MAX as f32 - 0.5
            })
            .collect();
        for target in [1.0, 4.5, 10.3, 40.0] {
            let g = groups_of_mean_size(&emb, 64, 16, target).unwrap();
            let got = g.mean_group_size();
            assert!(
                (got - target).abs() <= 0.15 * target,
                "target {target}: θ {} gives mean size {got}",
                g.theta()
            );
        }
        // Larger targets need lower thresholds.
        let t = |s| groups_of_mean_size(&emb, 64, 16, s).unwrap().theta();
        assert!(t(10.3) < t(4.5) && t(4.5) < t(1.5));
        for bad in [0.5, 65.0, f64::NAN] {
            let err = groups_of_mean_size(&emb, 64, 16, bad).unwrap_err();
            assert!(err.to_string().contains("mean group size"), "{err}");
        }
    }

    #[test]
    fn coarse_distributions_sum_to_one() {
        let g = SimilarityGroups::from_embeddings(&plane(), 4, 2, 0.8).unwrap();
        let probs = [0.1f32, 0.2, 0.3, 0.4];
        let coarse = g.coarse_distribution(&probs);
        assert!((coarse.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        // group {1,2}: 0.2/3 + 0.3/2
        assert!((coarse[2] - (0.2 / 3.0 + 0.3 / 2.0)).abs() < 1e-6);
    }

    #[test]
    fn theta_outside_the_open_interval_is_refused() {
        for theta in [1.0, -1.0, 1.5, f32::NAN] {
            let err = SimilarityGroups::from_embeddings(&plane(), 4, 2, theta).unwrap_err();
            assert!(
                matches!(err, InferError::InvalidSetting { name: "theta", .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn malformed_csr_is_refused() {
        let err = SimilarityGroups::from_lists(3, 0.5, &[vec![0, 1]]).unwrap_err();
        assert!(err.to_string().contains("token 2 is in no group"), "{err}");
        let err = SimilarityGroups::from_lists(2, 0.5, &[vec![0, 1, 5]]).unwrap_err();
        assert!(err.to_string().contains("token 5"), "{err}");
        let err = SimilarityGroups::from_csr(2, 0.5, vec![0, 1, 1, 2], vec![0, 1]).unwrap_err();
        assert!(err.to_string().contains("group 1 is empty"), "{err}");
    }

    #[test]
    fn embedding_tables_are_read_from_safetensors() {
        let dir = std::env::temp_dir().join(format!("voxspec-emb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model.safetensors");
        let table = plane();
        let bytes: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
        let view = TensorView::new(Dtype::F32, vec![4, 2], &bytes).unwrap();
        let odd = TensorView::new(Dtype::F32, vec![8], &bytes).unwrap();
        let file = safetensors::serialize([("embed.weight", view), ("flat", odd)], None).unwrap();
        std::fs::write(&path, file).unwrap();
        let (values, vocab, dim) = read_embedding_table(&path, "embed.weight").unwrap();
        assert_eq!((values.as_slice(), vocab, dim), (table.as_slice(), 4, 2));
        let err = read_embedding_table(&path, "flat").unwrap_err();
        assert!(
            err.to_string().contains("expected F32 [vocab, dim]"),
            "{err}"
        );
        let err = read_embedding_table(&path, "missing").unwrap_err();
        assert!(err.to_string().contains("embed.weight, flat"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn save_load_round_trip() {
        let g = SimilarityGroups::from_embeddings(&plane(), 4, 2, 0.8).unwrap();
        let dir = std::env::temp_dir().join(format!("voxspec-groups-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("groups.safetensors");
        g.save(&path).unwrap();
        let back = SimilarityGroups::load(&path).unwrap();
        assert_eq!(back, g);
        std::fs::write(&path, b"not safetensors").unwrap();
        let err = SimilarityGroups::load(&path).unwrap_err();
        assert!(err.to_string().contains("groups.safetensors"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
