//! The GPU path on a Vulkan device (`--features gpu`; CI runs it on Mesa's lavapipe): training
//! steps, cached decoding and greedy decoders on `wgpu` give the CPU's results, and the binary
//! takes `--device wgpu` and refuses an adapter it does not have with one message.
//!
//! Run with `cargo test --release -p voxspec-cli --features gpu --test gpu_vulkan` on a machine
//! with a Vulkan driver (lavapipe: `apt-get install mesa-vulkan-drivers`, and XDG_RUNTIME_DIR
//! set). Each test prints its largest CPU/GPU difference (`-- --nocapture` shows them).
#![cfg(feature = "gpu")]

mod common;

use std::sync::{Mutex, MutexGuard};

use burn::module::Module;
use burn::tensor::{Device, DeviceKind, Int, Tensor, TensorData};
use common::{fail, ok, s, text, voxspec};
use voxspec_data::{BucketConfig, Codes, TtsItem};
use voxspec_infer::{
    ArDecoder, Decoder, LanguageModel, Limits, LogitsRequest, MtpDecoder, Request, SamplerConfig,
    Transitions, TransitionsConfig, ViterbiConfig,
};
use voxspec_mtp::{MtpBatch, MtpConfig, MtpData, MtpModel, MtpTask, MtpTaskConfig, TtsPrompt};
use voxspec_train::{
    BatchSource, Losses, LrSchedule, OptimConfig, Phase, TrainConfig, TrainTask, Trainer,
};

const TEXT_VOCAB: usize = 12;
const CODEBOOK: usize = 10;

/// Largest difference allowed between a CPU and a GPU value (logits, losses): f32 sums in
/// another order. Observed on lavapipe: at most 2e-6 (losses of about 8-10 after six steps),
/// 7e-7 for logits (each test prints its own).
const TOLERANCE: f32 = 1e-4;

/// Burn's RNGs are per process and parameters initialise lazily: tests that build models run
/// one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// wgpu's preferred adapter (lavapipe in CI: `--device wgpu` there).
fn gpu() -> Device {
    Device::wgpu(DeviceKind::DefaultDevice)
}

/// A tiny MTP model initialised on the CPU, and the same weights on the GPU.
fn models() -> (MtpModel, MtpModel) {
    let cpu = Device::flex();
    cpu.seed(21);
    let model = MtpConfig::tiny(TEXT_VOCAB, CODEBOOK)
        .init(&cpu)
        .expect("model");
    // `model` is still held, so the lazy parameters initialise on the CPU and then move.
    let on_gpu = model.clone().to_device(&gpu());
    (model, on_gpu)
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().expect("f32")
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max)
}

/// Logits of every head at every position of one sequence, from the full forward:
/// `[head][time · vocab]`.
fn full_logits(model: &MtpModel, ids: &[u32], device: &Device) -> Vec<Vec<f32>> {
    let v: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
    let ids = Tensor::<2, Int>::from_data(TensorData::new(v, [1, ids.len()]), device);
    let heads = model.forward(ids, None).expect("forward");
    heads.into_iter().map(values).collect()
}

#[test]
fn the_forward_and_cached_decoding_on_the_gpu_equal_the_cpu_and_the_full_forward() {
    let _serial = serial();
    let (cpu, gpu_model) = models();
    let device = gpu();
    let heads = gpu_model.n_heads();
    let vocab = gpu_model.vocab_size();
    let prompts = [
        TtsPrompt::new(vec![3, 4, 5], vec![1, 2]),
        TtsPrompt::new(vec![7], vec![9, 9, 0, 4]),
    ];
    // Continuations fed in ragged blocks: sequence 0 gets 3 then 1 code, sequence 1 gets 1 then 2.
    let blocks = [vec![vec![5, 6, 7], vec![8]], vec![vec![2, 3], vec![1]]];
    let every = LogitsRequest {
        heads,
        last_only: false,
    };
    let mut cache = gpu_model.new_cache(2, 32).expect("cache");
    let first = gpu_model
        .prefill(&mut cache, &prompts, LogitsRequest::heads_at_last(heads))
        .expect("prefill");
    let second = gpu_model
        .extend(&mut cache, &blocks[0], every)
        .expect("extend");
    let third = gpu_model
        .extend(&mut cache, &blocks[1], LogitsRequest::heads_at_last(heads))
        .expect("extend");

    let (mut cached_vs_full, mut gpu_vs_cpu) = (0.0f32, 0.0f32);
    for (b, prompt) in prompts.iter().enumerate() {
        let mut codes = prompt.codes.clone();
        codes.extend(&blocks[0][b]);
        codes.extend(&blocks[1][b]);
        let ids = gpu_model.prefix_ids(&prompt.text, &codes).expect("ids");
        let full = full_logits(&gpu_model, &ids, &device);
        let on_cpu = full_logits(&cpu, &ids, &Device::flex());
        let at = |h: usize, t: usize| &full[h][t * vocab..(t + 1) * vocab];
        let prefix_len = prompt.text.len() + 1 + prompt.codes.len();
        assert_eq!(gpu_model.cache_len(&cache, b), ids.len());
        for h in 0..heads {
            gpu_vs_cpu = gpu_vs_cpu.max(max_diff(&full[h], &on_cpu[h]));
            cached_vs_full =
                cached_vs_full.max(max_diff(first.row(b, 0, h), at(h, prefix_len - 1)));
            for p in 0..blocks[0][b].len() {
                cached_vs_full =
                    cached_vs_full.max(max_diff(second.row(b, p, h), at(h, prefix_len + p)));
            }
            cached_vs_full = cached_vs_full.max(max_diff(third.row(b, 0, h), at(h, ids.len() - 1)));
        }
    }
    eprintln!(
        "forward: GPU vs CPU max |diff| {gpu_vs_cpu:.2e}; cached vs full {cached_vs_full:.2e}"
    );
    assert!(gpu_vs_cpu < TOLERANCE, "GPU vs CPU logits: {gpu_vs_cpu}");
    assert!(
        cached_vs_full < TOLERANCE,
        "cached vs full forward: {cached_vs_full}"
    );
}

fn requests() -> Vec<Request<TtsPrompt>> {
    let request = |text: Vec<u32>, codes: Vec<u32>, max_tokens: usize, seed: u64| Request {
        prompt: TtsPrompt::new(text, codes),
        limits: Limits {
            min_tokens: 2,
            max_tokens,
        },
        seed,
    };
    vec![
        request(vec![1, 2, 3], vec![4, 5], 12, 1),
        request(vec![7], vec![], 6, 2),
        request(vec![2, 2, 9, 9, 1], vec![0, 1, 2, 3, 4, 5], 9, 3),
    ]
}

fn tokens(decoder: &mut dyn Decoder<MtpModel>, model: &MtpModel) -> Vec<Vec<u32>> {
    decoder
        .generate(model, &requests(), &SamplerConfig::greedy())
        .expect("generate")
        .into_iter()
        .map(|g| g.tokens)
        .collect()
}

#[test]
fn greedy_decoders_on_the_gpu_emit_the_cpus_tokens() {
    let _serial = serial();
    let (cpu, gpu_model) = models();
    let transitions = std::sync::Arc::new(
        Transitions::from_sequences(
            [[0u32, 1, 2, 3, 4, 5, 6, 7].as_slice(), &[7, 6, 5, 4]],
            cpu.codebook_size() + 1,
            &TransitionsConfig::default(),
        )
        .expect("transitions"),
    );
    type MakeDecoder = fn() -> Box<dyn Decoder<MtpModel>>;
    let decoders: Vec<(&str, MakeDecoder)> = vec![
        ("ar", || Box::new(ArDecoder::new())),
        ("mtp k=4", || Box::new(MtpDecoder::new(4).expect("mtp"))),
    ];
    for (name, make) in decoders {
        let on_cpu = tokens(make().as_mut(), &cpu);
        let on_gpu = tokens(make().as_mut(), &gpu_model);
        assert_eq!(on_gpu, on_cpu, "{name}: GPU vs CPU");
        assert!(on_cpu.iter().all(|t| !t.is_empty()), "{name}: {on_cpu:?}");
    }
    let viterbi = || {
        MtpDecoder::with_viterbi(4, ViterbiConfig::new(3), transitions.clone()).expect("viterbi")
    };
    assert_eq!(
        tokens(&mut viterbi(), &gpu_model),
        tokens(&mut viterbi(), &cpu),
        "mtp k=4 + viterbi: GPU vs CPU"
    );
}

/// Codes that step by +1 (mod the codebook), as in voxspec-mtp's training test.
fn items() -> Vec<TtsItem> {
    (0..16u32)
        .map(|i| {
            let len = 8 + (i as usize % 5);
            let start = i % CODEBOOK as u32;
            let codes: Vec<u32> = (0..len as u32)
                .map(|j| (start + j) % CODEBOOK as u32)
                .collect();
            TtsItem {
                id: format!("u{i}"),
                speaker: "s".into(),
                text: vec![1 + (i % 5), 2],
                codes: Codes::new(1, len, codes).expect("codes"),
                durations: None,
            }
        })
        .collect()
}

/// The MTP task with its model initialised on the CPU and forked to the training device, so a
/// GPU run starts from the CPU run's weights (the devices' RNGs differ).
struct CpuInit(MtpTask);

impl TrainTask for CpuInit {
    type Model = MtpModel;
    type Batch = MtpBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<MtpModel> {
        let cpu = Device::flex().autodiff();
        cpu.seed(5);
        let model = self.0.init_model(&cpu)?;
        // `model` is still held, so the lazy parameters initialise on the CPU and then move.
        Ok(model.clone().fork(device))
    }

    fn train_data(&self) -> &dyn BatchSource<MtpBatch> {
        self.0.train_data()
    }

    fn batch_items(&self, batch: &MtpBatch) -> usize {
        self.0.batch_items(batch)
    }

    fn phases(&self) -> Vec<Phase> {
        self.0.phases()
    }

    fn loss(
        &self,
        model: &MtpModel,
        batch: &MtpBatch,
        phase: usize,
    ) -> voxspec_train::Result<Losses> {
        self.0.loss(model, batch, phase)
    }
}

/// Trains the tiny MTP model for a few steps on `devices` (data-parallel when several) and
/// returns each step's loss and the trained model's logits on a fixed sequence, on the CPU.
fn train(devices: &[Device], grad_accum: usize) -> (Vec<f64>, Vec<f32>) {
    const STEPS: usize = 6;
    let config = MtpConfig::tiny(TEXT_VOCAB, CODEBOOK);
    let bucket = BucketConfig {
        max_items: 4,
        max_padded_len: 1024,
        shuffle: true,
        seed: 1,
    };
    let task = CpuInit(MtpTask {
        model: config.clone(),
        task: MtpTaskConfig {
            head_weights: vec![1.0; config.n_heads],
            bucket: bucket.clone(),
            code_noise: 0.0,
        },
        train: MtpData::new(&items(), &config, bucket),
        valid: None,
    });
    let train = TrainConfig {
        seed: 5,
        max_steps: STEPS,
        grad_accum,
        optimizer: OptimConfig {
            lr: 3e-3,
            warmup_steps: 2,
            schedule: LrSchedule::Cosine {
                decay_steps: STEPS,
                min_lr: 3e-4,
            },
            ..OptimConfig::default()
        },
        log_every: 1,
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let outcome = Trainer::new(train, task, dir.path(), &devices[0])
        .with_devices(devices)
        .run(&mut ())
        .expect("training runs");
    let records = voxspec_train::read_metrics(&dir.path().join("metrics.jsonl")).expect("metrics");
    let losses: Vec<f64> = records
        .iter()
        .filter(|r| r.split == "train")
        .map(|r| r.values["loss"])
        .collect();
    assert_eq!(losses.len(), STEPS, "one loss per step");
    let trained = outcome.model.valid().to_device(&Device::flex());
    let ids = trained.prefix_ids(&[1, 2], &[3, 4, 5, 6]).expect("ids");
    let logits = full_logits(&trained, &ids, &Device::flex()).concat();
    (losses, logits)
}

fn compare(what: &str, cpu: &(Vec<f64>, Vec<f32>), gpu: &(Vec<f64>, Vec<f32>)) {
    let loss_diff = cpu
        .0
        .iter()
        .zip(&gpu.0)
        .map(|(a, b)| (a - b).abs() as f32)
        .fold(0.0f32, f32::max);
    let logit_diff = max_diff(&cpu.1, &gpu.1);
    eprintln!(
        "{what}: losses {:?} (CPU) vs {:?} (GPU); max |diff| loss {loss_diff:.2e}, \
         trained logits {logit_diff:.2e}",
        cpu.0, gpu.0
    );
    assert!(loss_diff < TOLERANCE, "{what}: loss differs by {loss_diff}");
    assert!(
        logit_diff < TOLERANCE,
        "{what}: trained logits differ by {logit_diff}"
    );
}

#[test]
fn training_steps_on_the_gpu_equal_the_cpu_run() {
    let _serial = serial();
    let cpu = Device::flex();
    let one = (train(std::slice::from_ref(&cpu), 1), train(&[gpu()], 1));
    compare("one device", &one.0, &one.1);
    assert!(
        one.0.0.last() < one.0.0.first(),
        "the loss falls: {:?}",
        one.0.0
    );
    // Two replicas on the GPU take the step of one device accumulating two micro-batches.
    let two = (train(&[cpu], 2), train(&[gpu(), gpu()], 1));
    compare("two replicas", &two.0, &two.1);
}

#[test]
fn the_binary_trains_and_benchmarks_on_wgpu_and_refuses_a_missing_adapter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("bench-train.json");
    let report = ok(&[
        "--device",
        "wgpu",
        "bench",
        "train",
        "--layers",
        "1",
        "--d-model",
        "32",
        "--heads",
        "2",
        "--vocab",
        "64",
        "--batch",
        "2",
        "--seq-len",
        "16",
        "--warmup",
        "1",
        "--steps",
        "2",
        "--out",
        s(&out),
    ]);
    assert!(report.contains("training throughput"), "{report}");
    let forward = dir.path().join("bench-forward.json");
    ok(&[
        "--device",
        "wgpu:0",
        "bench",
        "forward",
        "--engine",
        "burn",
        "--d-model",
        "32",
        "--layers",
        "1",
        "--codebook",
        "16",
        "--context",
        "8",
        "--max-k",
        "2",
        "--repeat",
        "2",
        "--generate",
        "4",
        "--out",
        s(&forward),
    ]);
    // Burn's rows on the GPU are set against the device's bandwidth, not the host's.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&forward).expect("report")).expect("json");
    let device_gbs = report["device_bandwidth_gbs"]
        .as_f64()
        .expect("device bandwidth");
    assert!(device_gbs > 0.0, "{report}");
    let burn_floor = report["burn_floor_ms"].as_f64().expect("burn floor");
    let expected = report["weight_mb"].as_f64().expect("weights") / device_gbs;
    assert!(
        (burn_floor - expected).abs() <= 1e-9 * expected.max(1.0),
        "{report}"
    );
    let row = &report["results"][0];
    let multiple = row["median_ms"].as_f64().expect("ms") / burn_floor;
    assert!((row["floor_multiple"].as_f64().expect("multiple") - multiple).abs() < 1e-6 * multiple);
    let error = fail(&["--device", "wgpu:99", "bench", "train", "--steps", "1"]);
    assert!(
        error.contains("wgpu:99") && error.contains("adapter"),
        "{error}"
    );
    let refused = voxspec(&["--device", "vulkan", "bench", "train"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("--device wgpu"),
        "{}",
        text(&refused)
    );
}
