#!/usr/bin/env python3
"""asr_judge.py: an independent speech-recognition judge of audio clips (pocketsphinx 5, en-us).

An optional evaluation tool, independent of voxspec's own models: it asks an off-the-shelf
offline recogniser (CMU pocketsphinx 5 from PyPI, with its bundled U.S. English acoustic model,
3-gram language model and CMU dictionary) what the clips say, two ways:

* open vocabulary (``wer``): decode with the default language model and dictionary; report each
  clip's hypothesis and the corpus word and character error rates (jiwer) against the reference;
* forced choice (``choice``): decode with a JSGF grammar whose alternatives are the candidate
  sentences; a clip is *identified* when the decoded sentence is its own transcript. Accuracy =
  identified / clips, with its binomial standard error sqrt(p(1-p)/n); chance = 1 / candidates.
  Audio that carries nothing of its sentence (noise, silence) is identified at about chance.

Setup (once; makes <repo>/.venv-judge):  tools/setup_judge.sh
Usage:
  .venv-judge/bin/python tools/asr_judge.py (--dir DIR | --manifest FILE) [--candidates FILE]
      [--mode both|wer|choice] [--limit N] [--jobs N] [--control noise|silence|shuffled]
      [--out REPORT.json] [--show N]

Input (as ``voxspec eval intelligibility``):
  --dir DIR        every audio file (wav, flac, ogg, mp3) in DIR, by name, with its transcript in
                   <NAME>.txt beside it (or else <NAME>.normalized.txt, as in LibriTTS).
  --manifest FILE  JSON lines with at least id, path, text (``voxspec prepare`` output), or a
                   tab-separated file with a header naming id, path and text or transcript (like
                   kathleen's manifest.tsv). Relative paths are resolved against the manifest's
                   folder, then the working directory.
  --candidates F   the forced-choice sentences: a *.jsonl manifest (its text fields) or a text
                   file, one sentence per line. Default: the clips' own transcripts. Candidates
                   are deduplicated after normalisation; every clip's transcript must be one.
  --limit N        use only the first N clips (by name for --dir, in file order for --manifest).
  --jobs N         worker processes (default 1). Results do not depend on it.
  --show N         print the N clips with the highest WER (default 3).
  --control KIND   replace the clips by a control made in a temporary folder, then judge it:
                   noise    = Gaussian white noise of each clip's length and RMS level (seeded by
                              the clip id), transcript kept;
                   silence  = digital silence of each clip's length, transcript kept;
                   shuffled = the original audio, each clip given another clip's transcript (a
                              seeded derangement among clips whose normalised texts differ);
                              also counts how often the sentence actually spoken was chosen.
                   Forced choice should then be at or below chance and the WER near 100 %.

Every clip is decoded by a fresh decoder (one per clip and mode), so nothing adapts across
clips (pocketsphinx's live cepstral-mean normalisation would otherwise carry from clip to clip),
and the whole clip is passed at once (full_utt), so the cepstral mean is the clip's own (batch
CMN; streaming it through a fresh decoder instead raised the WER of 30 kathleen clips from 20.9 %
to 27.8 %). Results do not depend on clip order. Audio is read with soundfile, mixed to mono,
resampled to 16 kHz (scipy resample_poly) and passed as 16-bit samples.

Normalisation (references, hypotheses and candidates alike): lowercase; every character other
than a-z, 0-9 and the apostrophe becomes a space (so "wolf-dog" -> "wolf dog"); apostrophes not
between two letters or digits are removed ("'em" -> "em", "o'brien" kept); whitespace collapsed.
Digits are not spelled out (a digit in a transcript is a word the recogniser cannot say; the
kathleen and minitts transcripts have none).

Words of the candidates missing from the pocketsphinx dictionary get a pronunciation for the
grammar: "X's" as X + S/Z/IH Z when X is in the dictionary, else a split into two dictionary
words ("nightglow" -> night + glow), else a crude letter-to-phone spelling. They are listed with
their source in the report (``oov``). Empty or failed decodes count as not identified.

Output: a human summary on stdout; --out writes JSON with the tool and package versions, model
paths, settings, the candidates (as given, deduplicated), per clip (id, path, reference,
hypothesis, wer, chosen: the candidate decoded or null, identified) and the summary {clips,
candidates, wer, cer, identified, accuracy, accuracy_se, chance}. Bad input
(missing folder, no clips, a clip without transcript, unreadable audio) exits with status 2 and
one message naming the problem.
"""

import argparse
import csv
import hashlib
import json
import math
import os
import re
import sys
import tempfile
from importlib import metadata

RATE = 16000
AUDIO_EXT = (".wav", ".flac", ".ogg", ".mp3")
NORMALISATION = ("lowercase; characters other than a-z, 0-9, apostrophe -> space; apostrophes "
                 "not between letters/digits removed; whitespace collapsed; digits not spelled")
SEED = 20240613


class InputError(Exception):
    """Bad input: reported as one message, exit status 2."""



def wer_standard_error(refs, hyps):
    """Standard error of the corpus WER (errors summed over clips / words summed over clips), with
    the clips as the sampled units: a sentence's words are not independent of each other, so the
    spread comes from how the clips' errors scatter around WER x their length."""
    import jiwer

    errors, words = [], []
    for ref, hyp in zip(refs, hyps):
        w = jiwer.process_words(ref, hyp)
        errors.append(w.substitutions + w.deletions + w.insertions)
        words.append(w.substitutions + w.deletions + w.hits)
    n, total = len(words), sum(words)
    if n < 2 or total == 0:
        return 0.0
    wer = sum(errors) / total
    scatter = sum((e - wer * k) ** 2 for e, k in zip(errors, words))
    return math.sqrt(n / (n - 1) * scatter) / total

def normalise(text):
    t = re.sub(r"[^a-z0-9']+", " ", text.lower())
    t = re.sub(r"(?<![a-z0-9])'|'(?![a-z0-9])", " ", t)
    return " ".join(t.split())


# ----------------------------------------------------------------------------------- input

def read_dir(folder):
    if not os.path.isdir(folder):
        raise InputError(f"no such directory: {folder}")
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith(AUDIO_EXT)
                   and os.path.isfile(os.path.join(folder, n)))
    if not names:
        raise InputError(f"{folder} has no audio files ({', '.join(AUDIO_EXT)})")
    clips = []
    for name in names:
        stem = os.path.splitext(name)[0]
        path = os.path.join(folder, name)
        for txt in (stem + ".txt", stem + ".normalized.txt"):
            if os.path.isfile(os.path.join(folder, txt)):
                with open(os.path.join(folder, txt), encoding="utf-8") as f:
                    clips.append({"id": stem, "path": path, "text": f.read().strip()})
                break
        else:
            raise InputError(f"{path} has no transcript {os.path.join(folder, stem + '.txt')}")
    return clips


def read_manifest(path):
    if not os.path.isfile(path):
        raise InputError(f"no such manifest: {path}")
    base = os.path.dirname(os.path.abspath(path))
    rows = []
    with open(path, encoding="utf-8") as f:
        if path.endswith(".tsv"):
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            field = "text" if "text" in (reader.fieldnames or []) else "transcript"
            if not {"id", "path", field} <= set(reader.fieldnames or []):
                raise InputError(f"{path}: the header must name id, path and text or transcript")
            rows = [{"id": r["id"], "path": r["path"], "text": r[field]} for r in reader]
        else:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    rows.append({"id": str(r["id"]), "path": r["path"], "text": r["text"]})
                except (ValueError, KeyError, TypeError) as e:
                    raise InputError(f"{path} line {i}: not a JSON object with id, path, text "
                                     f"({e})") from None
    for r in rows:
        if not os.path.isabs(r["path"]):
            beside = os.path.join(base, r["path"])
            r["path"] = beside if os.path.exists(beside) else os.path.abspath(r["path"])
    return rows


def read_candidates(path):
    if not os.path.isfile(path):
        raise InputError(f"no such candidates file: {path}")
    if path.endswith(".jsonl"):
        return [c["text"] for c in read_manifest(path)]
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def load_audio(path):
    """16 kHz mono int16 samples of an audio file; InputError naming the file if unreadable."""
    import numpy as np
    import soundfile as sf
    from scipy.signal import resample_poly
    try:
        x, rate = sf.read(path, dtype="float64", always_2d=True)
    except Exception as e:  # soundfile raises several kinds
        raise InputError(f"cannot read the audio {path}: {e}") from None
    x = x.mean(axis=1)
    if rate != RATE:
        g = math.gcd(int(rate), RATE)
        x = resample_poly(x, RATE // g, int(rate) // g)
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)


# -------------------------------------------------------------------------------- controls

def make_control(clips, kind, tmp):
    import numpy as np
    import soundfile as sf
    out = []
    if kind == "shuffled":
        texts = [normalise(c["text"]) for c in clips]
        if len(set(texts)) < 2:
            raise InputError("--control shuffled needs clips with at least two different texts")
        for attempt in range(1000):
            order = np.random.default_rng(SEED + attempt).permutation(len(clips))
            nxt = {int(order[i]): int(order[(i + 1) % len(order)]) for i in range(len(order))}
            if all(texts[i] != texts[j] for i, j in nxt.items()):
                break
        else:
            raise InputError("--control shuffled: found no derangement of the transcripts")
        return [dict(c, text=clips[nxt[i]]["text"], spoken=texts[i]) for i, c in enumerate(clips)]
    for c in clips:
        audio = load_audio(c["path"]).astype(np.float64)
        n = len(audio)
        if kind == "noise":
            rms = float(np.sqrt(np.mean(audio ** 2))) if n else 0.0
            seed = int(hashlib.md5(c["id"].encode()).hexdigest()[:8], 16)
            x = np.random.default_rng(seed).normal(0.0, rms or 1000.0, n)
            x = np.clip(np.round(x), -32768, 32767).astype(np.int16)
        else:
            x = np.zeros(n, dtype=np.int16)
        path = os.path.join(tmp, f"{len(out):05d}.wav")
        sf.write(path, x, RATE, subtype="PCM_16")
        out.append(dict(c, path=path, source_path=c["path"]))
    return out


# ------------------------------------------------------------------------- pronunciations

LETTERS = [("tch", "CH"), ("igh", "AY"), ("ch", "CH"), ("sh", "SH"), ("th", "TH"), ("ph", "F"),
           ("ck", "K"), ("ng", "NG"), ("qu", "K W"), ("ee", "IY"), ("ea", "IY"), ("oo", "UW"),
           ("ou", "AW"), ("ow", "OW"), ("ai", "EY"), ("ay", "EY"), ("oa", "OW"), ("ie", "IY"),
           ("a", "AE"), ("b", "B"), ("c", "K"), ("d", "D"), ("e", "EH"), ("f", "F"), ("g", "G"),
           ("h", "HH"), ("i", "IH"), ("j", "JH"), ("k", "K"), ("l", "L"), ("m", "M"), ("n", "N"),
           ("o", "AA"), ("p", "P"), ("q", "K"), ("r", "R"), ("s", "S"), ("t", "T"), ("u", "AH"),
           ("v", "V"), ("w", "W"), ("x", "K S"), ("y", "IY"), ("z", "Z"), ("0", "Z IH R OW"),
           ("1", "W AH N"), ("2", "T UW"), ("3", "TH R IY"), ("4", "F AO R"), ("5", "F AY V"),
           ("6", "S IH K S"), ("7", "S EH V AH N"), ("8", "EY T"), ("9", "N AY N")]


def letters_to_phones(word):
    w = word.replace("'", "")
    w = re.sub(r"([b-df-hj-np-tv-z])\1", r"\1", w)  # doubled consonants sound once
    if len(w) > 2 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]  # silent final e
    phones, i = [], 0
    while i < len(w):
        for graph, ph in LETTERS:
            if w.startswith(graph, i):
                phones.append(ph)
                i += len(graph)
                break
        else:
            i += 1
    return " ".join(phones) or "AH"


def read_dictionary(path):
    pron = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if parts:
                pron.setdefault(parts[0].lower(), " ".join(parts[1:]))
    return pron


def pronounce(word, pron):
    """(phones, source) for a word that is not in the dictionary."""
    if word.endswith("'s") and word[:-2] in pron:
        stem = pron[word[:-2]]
        last = stem.split()[-1]
        suffix = "IH Z" if last in ("S", "Z", "SH", "ZH", "CH", "JH") else (
            "S" if last in ("P", "T", "K", "F", "TH") else "Z")
        return f"{stem} {suffix}", "possessive"
    for k in range(2, len(word) - 1):
        a, b = word[:k], word[k:]
        if len(a) > 2 and len(b) > 2 and a in pron and b in pron:
            return f"{pron[a]} {pron[b]}", "compound"
    return letters_to_phones(word), "letters"


def grammar(candidates):
    alts = "\n    | ".join(f"( {c} )" for c in candidates)
    return f"#JSGF V1.0;\ngrammar choice;\npublic <sentence> = {alts} ;\n"


# ------------------------------------------------------------------------------- decoding

JOB = {}


def init_worker(job):
    JOB.update(job)


def decode(audio, choice):
    """Normalised hypothesis of one clip by a fresh decoder, and whether decoding failed."""
    from pocketsphinx import Decoder
    d = Decoder(hmm=JOB["hmm"], dict=JOB["dict"], lm=None if choice else JOB["lm"],
                samprate=RATE, loglevel="FATAL")
    if choice:
        for word, phones in JOB["extra_words"]:
            d.add_word(word, phones, True)
        d.add_jsgf_string("choice", JOB["grammar"])
        d.activate_search("choice")
    try:
        d.start_utt()
        d.process_raw(audio.tobytes(), False, True)  # no_search=False, full_utt=True
        d.end_utt()
    except RuntimeError:
        return "", True
    h = d.hyp()
    return (normalise(h.hypstr) if h is not None else ""), False


def judge_clip(clip):
    try:
        audio = load_audio(clip["path"])
    except InputError as e:
        return {"error": str(e)}
    out = {"failed": []}
    if JOB["mode"] in ("both", "wer"):
        out["hypothesis"], bad = decode(audio, False)
        out["failed"] += ["wer"] if bad else []
    if JOB["mode"] in ("both", "choice"):
        out["choice_words"], bad = decode(audio, True)
        out["failed"] += ["choice"] if bad else []
    return out


def run_all(clips, job, jobs):
    if jobs <= 1:
        init_worker(job)
        return [judge_clip(c) for c in clips]
    from multiprocessing import get_context
    with get_context("spawn").Pool(jobs, init_worker, (job,)) as pool:
        return pool.map(judge_clip, clips, chunksize=1)


# ----------------------------------------------------------------------------------- main

def versions():
    v = {"python": sys.version.split()[0]}
    for pkg in ("pocketsphinx", "jiwer", "numpy", "scipy", "soundfile"):
        try:
            v[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            v[pkg] = None
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="asr_judge.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dir", help="folder of audio files, each with <NAME>.txt beside it "
                     "(or <NAME>.normalized.txt)")
    src.add_argument("--manifest", help="JSON lines with id, path, text (or a .tsv with a header "
                     "naming id, path, text|transcript); relative paths against its folder, "
                     "then the working directory")
    p.add_argument("--candidates", help="forced-choice sentences: *.jsonl (its texts) or one per "
                   "line [default: the clips' own transcripts, deduplicated]")
    p.add_argument("--mode", choices=("both", "wer", "choice"), default="both",
                   help="open-vocabulary WER/CER, forced choice, or both [both]")
    p.add_argument("--limit", type=int, help="use only the first N clips")
    p.add_argument("--jobs", type=int, default=1, help="worker processes [1]")
    p.add_argument("--control", choices=("noise", "silence", "shuffled"),
                   help="judge a control made from the clips instead (see above)")
    p.add_argument("--out", help="write the JSON report here")
    p.add_argument("--show", type=int, default=3, help="misrecognised clips to print [3]")
    a = p.parse_args(argv)
    if a.jobs < 1 or (a.limit is not None and a.limit < 1):
        p.error("--jobs and --limit must be at least 1")
    return a


def main(argv=None):
    a = parse_args(argv)
    try:
        import jiwer
        import pocketsphinx
    except ImportError as e:
        raise InputError(f"{e}; run tools/setup_judge.sh and use .venv-judge/bin/python") from None
    clips = read_dir(a.dir) if a.dir else read_manifest(a.manifest)
    source = a.dir or a.manifest
    if a.limit:
        clips = clips[:a.limit]
    if not clips:
        raise InputError(f"{source} has no clips")
    for c in clips:
        c["reference"] = normalise(c["text"])
        if not c["reference"]:
            raise InputError(f"clip {c['id']} ({c['path']}): empty transcript")
        if not os.path.isfile(c["path"]):
            raise InputError(f"clip {c['id']}: no audio file {c['path']}")

    model = pocketsphinx.get_model_path()
    job = {"mode": a.mode, "hmm": os.path.join(model, "en-us", "en-us"),
           "lm": os.path.join(model, "en-us", "en-us.lm.bin"),
           "dict": os.path.join(model, "en-us", "cmudict-en-us.dict"),
           "extra_words": [], "grammar": ""}
    with tempfile.TemporaryDirectory(prefix="asr_judge_") as tmp:
        if a.control:
            clips = make_control(clips, a.control, tmp)
            for c in clips:
                c["reference"] = normalise(c["text"])
        texts = read_candidates(a.candidates) if a.candidates else [c["text"] for c in clips]
        candidates = {}
        for t in texts:
            if normalise(t):
                candidates.setdefault(normalise(t), t)
        oov = {}
        if a.mode != "wer":
            for c in clips:
                if c["reference"] not in candidates:
                    raise InputError(f"clip {c['id']} ({c['path']}): its transcript {c['text']!r} "
                                     f"is not among the {len(candidates)} candidates (compared "
                                     "after normalisation)")
            pron = read_dictionary(job["dict"])
            for w in sorted({w for s in candidates for w in s.split()} - set(pron)):
                phones, how = pronounce(w, pron)
                oov[w] = {"phones": phones, "source": how}
            job["extra_words"] = [(w, o["phones"]) for w, o in oov.items()]
            job["grammar"] = grammar(list(candidates))
        for c in clips:
            load_audio(c["path"])  # fail early, naming the file
        results = run_all(clips, job, a.jobs)
    for r in results:
        if "error" in r:
            raise InputError(r["error"])

    report_clips, refs, hyps, identified, spoken = [], [], [], 0, 0
    for c, r in zip(clips, results):
        rc = {"id": c["id"], "path": c.get("source_path", c["path"]), "reference": c["reference"]}
        if "hypothesis" in r:
            rc["hypothesis"] = r["hypothesis"]
            rc["wer"] = jiwer.wer(c["reference"], r["hypothesis"])
            refs.append(c["reference"])
            hyps.append(r["hypothesis"])
        if "choice_words" in r:
            rc["chosen"] = candidates.get(r["choice_words"])  # None: no whole candidate decoded
            rc["choice_decoded"] = r["choice_words"]
            rc["identified"] = rc["chosen"] is not None and r["choice_words"] == c["reference"]
            identified += rc["identified"]
            if "spoken" in c:  # shuffled control: was the sentence actually spoken chosen?
                rc["spoken"] = c["spoken"]
                spoken += rc["chosen"] is not None and r["choice_words"] == c["spoken"]
        if r["failed"]:
            rc["decode_failed"] = r["failed"]
        report_clips.append(rc)

    n = len(clips)
    summary = {"clips": n}
    if refs:
        words = jiwer.process_words(refs, hyps)
        summary.update(wer=words.wer, wer_se=wer_standard_error(refs, hyps),
                       cer=jiwer.cer(refs, hyps), substitutions=words.substitutions,
                       deletions=words.deletions, insertions=words.insertions,
                       reference_words=sum(len(r.split()) for r in refs))
    if a.mode != "wer":
        p = identified / n
        summary.update(candidates=len(candidates), identified=identified, accuracy=p,
                       accuracy_se=math.sqrt(p * (1 - p) / n), chance=1 / len(candidates),
                       oov_words=len(oov))
        if a.control == "shuffled":
            summary["chose_spoken_sentence"] = spoken

    label = f" (control: {a.control})" if a.control else ""
    print(f"asr_judge: {n} clip{'s' * (n != 1)} from {source}{label}; pocketsphinx "
          f"{versions()['pocketsphinx']}, en-us; a fresh decoder per clip")
    if refs:
        print(f"  open vocabulary: WER {100 * summary['wer']:.1f} ± {100 * summary['wer_se']:.1f} % "
              f"({summary['substitutions']} "
              f"sub, {summary['deletions']} del, {summary['insertions']} ins / "
              f"{summary['reference_words']} words), CER {100 * summary['cer']:.1f} %")
        worst = sorted(report_clips, key=lambda x: -x["wer"])[:a.show]
        for w in worst:
            print(f"    {w['id']} WER {100 * w['wer']:.0f} %\n      ref: {w['reference']}\n"
                  f"      hyp: {w['hypothesis']}")
    if a.mode != "wer":
        print(f"  forced choice among {len(candidates)} candidates: {identified}/{n} identified = "
              f"{100 * summary['accuracy']:.1f} % ± {100 * summary['accuracy_se']:.1f} % "
              f"(binomial s.e.); chance {100 * summary['chance']:.2f} %")
        if a.control == "shuffled":
            print(f"  (chose the sentence actually spoken, not the one given: {spoken}/{n})")
        if oov:
            print(f"  {len(oov)} candidate words not in the dictionary, given pronunciations: "
                  + ", ".join(f"{w} ({o['source']})" for w, o in oov.items()))
    if a.out:
        report = {
            "tool": "tools/asr_judge.py", "versions": versions(),
            "model": {"path": model, "hmm": job["hmm"], "lm": job["lm"], "dict": job["dict"]},
            "settings": {"input": source, "mode": a.mode, "limit": a.limit, "jobs": a.jobs,
                         "control": a.control, "candidates_from": a.candidates
                         or "the clips' own transcripts", "sample_rate": RATE,
                         "normalisation": NORMALISATION, "fresh_decoder_per_clip": True},
            "summary": summary, "oov": oov,
            "candidates": list(candidates.values()) if a.mode != "wer" else None,
            "clips": report_clips}
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
        print(f"  report: {a.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:
        print(f"asr_judge: {e}", file=sys.stderr)
        sys.exit(2)
