//! Steward's own CPU kernels for two element-wise operators of the embedding model, registered
//! with ONNX Runtime as the `steward` operator domain (see scripts/build-embedding-model.py).
//!
//! ONNX Runtime's CPU `SkipLayerNormalization` and `BiasGelu` are generic: the layer norm
//! accumulates and divides in double precision element by element, the GELU evaluates `erf` one
//! value at a time. On MiniLM they took a third of the run time, more than the attention core.
//! These versions work in single precision with lane accumulators the compiler vectorizes, and
//! use AVX2/FMA when the CPU has them (checked at run time; a portable build of the same code
//! otherwise), AVX-512 when the CPU has it. In a session with intra-op threads (the query session)
//! the rows are split between them.
//!
//! - `SkipLayerNorm(x, skip, gamma, beta, bias) = LayerNorm(x + skip + bias) * gamma + beta` over
//!   the last axis (two-pass mean and variance; `epsilon` attribute, default 1e-12).
//! - `BiasGelu(x, bias) = GELU(x + bias)`, the exact (erf) GELU. `erf` is Abramowitz–Stegun 7.1.26
//!   (absolute error below 1.5e-7) over a range-reduced `exp`.

use ort::operator::{ComputeContext, Kernel, KernelContext, Operator, OperatorDomain, OperatorInput, OperatorOutput};
use ort::value::TensorElementType;

pub const DOMAIN: &str = "steward";

/// The `steward` operator domain, for a session that loads the built embedding model.
pub fn domain() -> ort::Result<OperatorDomain> {
    OperatorDomain::new(DOMAIN)?.add(SkipLayerNorm)?.add(BiasGelu)
}

/// Lanes of the accumulators: two AVX2 registers, so the sums vectorize without reassociation.
const LANES: usize = 16;

#[inline(always)]
fn lane_sum(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += f(*v);
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|v| f(*v)).sum();
    acc.iter().sum::<f32>() + tail
}

#[inline(always)]
fn skip_layer_norm_rows(x: &[f32], skip: &[f32], params: &NormParams, out: &mut [f32]) {
    let h = params.gamma.len();
    for ((xr, sr), or) in x.chunks_exact(h).zip(skip.chunks_exact(h)).zip(out.chunks_exact_mut(h)) {
        match params.bias {
            Some(b) => {
                for (((o, a), s), b) in or.iter_mut().zip(xr).zip(sr).zip(b) {
                    *o = a + s + b;
                }
            }
            None => {
                for ((o, a), s) in or.iter_mut().zip(xr).zip(sr) {
                    *o = a + s;
                }
            }
        }
        let mean = lane_sum(or, |v| v) / h as f32;
        let var = lane_sum(or, |v| (v - mean) * (v - mean)) / h as f32;
        let inv = 1.0 / (var + params.epsilon).sqrt();
        for ((o, g), b) in or.iter_mut().zip(params.gamma).zip(params.beta) {
            *o = (*o - mean) * inv * g + b;
        }
    }
}

/// `e^y` for `y <= 0` (clamped at -87, where it is below the smallest normal float anyway).
///
/// `y = k ln 2 + r` with `|r| <= ln 2 / 2`; `e^r` by its degree-6 Taylor polynomial (relative error
/// about 1e-7), `2^k` built in the exponent bits. Adding 1.5 * 2^23 rounds `y / ln 2` to an integer
/// held in the low mantissa bits, which stays branch-free and vectorizes (a float-to-int cast
/// would not: Rust's saturating `as` becomes per-lane code).
#[inline(always)]
fn exp_nonpositive(y: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const ROUND: f32 = 12_582_912.0;
    let y = y.max(-87.0);
    let t = y * LOG2E + ROUND;
    let k = t - ROUND;
    let r = y - k * LN2_HI - k * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // the low mantissa bits of `t` are 2^22 + k; adding the exponent bias and shifting leaves k + 127
    p * f32::from_bits(t.to_bits().wrapping_add(127) << 23)
}

#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t * (0.254_829_6 + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    (1.0 - poly * exp_nonpositive(-a * a)).copysign(x)
}

#[inline(always)]
fn bias_gelu_rows(x: &[f32], bias: &[f32], out: &mut [f32]) {
    let n = bias.len();
    for (xr, or) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        for ((o, a), b) in or.iter_mut().zip(xr).zip(bias) {
            let v = a + b;
            *o = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
        }
    }
}

struct NormParams<'a> {
    gamma: &'a [f32],
    beta: &'a [f32],
    bias: Option<&'a [f32]>,
    epsilon: f32,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The same row functions compiled for wider vectors: AVX-512 (16 lanes; the lane accumulators
    //! become one register, so results are bit-identical to the AVX2 build) or AVX2/FMA (8 lanes).

    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub(super) unsafe fn skip_layer_norm_512(x: &[f32], skip: &[f32], params: &super::NormParams, out: &mut [f32]) {
        super::skip_layer_norm_rows(x, skip, params, out)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub(super) unsafe fn bias_gelu_512(x: &[f32], bias: &[f32], out: &mut [f32]) {
        super::bias_gelu_rows(x, bias, out)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn skip_layer_norm_256(x: &[f32], skip: &[f32], params: &super::NormParams, out: &mut [f32]) {
        super::skip_layer_norm_rows(x, skip, params, out)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn bias_gelu_256(x: &[f32], bias: &[f32], out: &mut [f32]) {
        super::bias_gelu_rows(x, bias, out)
    }

    pub(super) fn avx512() -> bool {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl") && avx2()
    }

    pub(super) fn avx2() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
}

fn skip_layer_norm(x: &[f32], skip: &[f32], params: &NormParams, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY (both): the CPU supports the features the function is compiled for (checked).
        if x86::avx512() {
            return unsafe { x86::skip_layer_norm_512(x, skip, params, out) };
        }
        if x86::avx2() {
            return unsafe { x86::skip_layer_norm_256(x, skip, params, out) };
        }
    }
    skip_layer_norm_rows(x, skip, params, out)
}

fn bias_gelu(x: &[f32], bias: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY (both): as above.
        if x86::avx512() {
            return unsafe { x86::bias_gelu_512(x, bias, out) };
        }
        if x86::avx2() {
            return unsafe { x86::bias_gelu_256(x, bias, out) };
        }
    }
    bias_gelu_rows(x, bias, out)
}

/// Elements per parallel block: below this a second thread costs more than it saves.
const BLOCK_ELEMENTS: usize = 8192;

/// The output's address, shared by the blocks of one [`for_row_blocks`] call.
struct SharedOut(*mut f32);

// SAFETY: the blocks of one call write disjoint ranges of the output, and the call returns only
// after every block has run (ONNX Runtime's ParallelFor waits for its iterations).
unsafe impl Sync for SharedOut {}
unsafe impl Send for SharedOut {}

impl SharedOut {
    /// The address (a method, so closures capture the whole `Sync` wrapper, not the raw pointer).
    fn ptr(&self) -> *mut f32 {
        self.0
    }
}

/// Splits `out` (rows of `width`) into blocks of whole rows and runs `f(first_row, block)` on
/// each, on the session's intra-op threads when it has them (the query session: a short query's
/// latency), inline otherwise (the single-threaded ingestion sessions).
fn for_row_blocks(
    ctx: &ComputeContext,
    out: &mut [f32],
    width: usize,
    f: impl Fn(usize, &mut [f32]) + Sync + Send,
) -> ort::Result<()> {
    let rows = out.len() / width;
    let blocks = (out.len() / BLOCK_ELEMENTS).clamp(1, rows.max(1));
    if blocks == 1 {
        f(0, out);
        return Ok(());
    }
    let rows_per_block = rows.div_ceil(blocks);
    let blocks = rows.div_ceil(rows_per_block);
    let len = out.len();
    let shared = SharedOut(out.as_mut_ptr());
    ctx.par_for(blocks, blocks, move |b| {
        let first = b * rows_per_block;
        let start = first * width;
        let end = ((first + rows_per_block) * width).min(len);
        // SAFETY: block `b` covers rows [first, first + rows_per_block) only, within `out`'s
        // length; each block index runs once, and `out` outlives the call (see `SharedOut`).
        let block = unsafe { std::slice::from_raw_parts_mut(shared.ptr().add(start), end - start) };
        f(first, block)
    })
}

fn kernel_error(op: &str, message: &str) -> ort::Error {
    ort::Error::new(format!("{DOMAIN}.{op}: {message}"))
}

struct SkipLayerNorm;

struct SkipLayerNormKernel {
    epsilon: f32,
}

impl Operator for SkipLayerNorm {
    type Kernel<'attr> = SkipLayerNormKernel;

    fn name(&self) -> &str {
        "SkipLayerNorm"
    }

    fn inputs(&self) -> impl IntoIterator<Item = OperatorInput> {
        [
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::optional(TensorElementType::Float32),
        ]
    }

    fn outputs(&self) -> impl IntoIterator<Item = OperatorOutput> {
        [OperatorOutput::required(TensorElementType::Float32)]
    }

    fn create_kernel<'attr>(&self, ctx: &KernelContext<'attr>) -> ort::Result<SkipLayerNormKernel> {
        Ok(SkipLayerNormKernel { epsilon: ctx.get::<f32>("epsilon").unwrap_or(1e-12) })
    }
}

impl Kernel for SkipLayerNormKernel {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        let op = "SkipLayerNorm";
        let input = |i: usize| ctx.input(i)?.ok_or_else(|| kernel_error(op, &format!("input {i} is missing")));
        let (x, skip, gamma, beta) = (input(0)?, input(1)?, input(2)?, input(3)?);
        let bias = ctx.input(4)?;
        let (shape, x) = x.try_extract_tensor::<f32>()?;
        let (_, skip) = skip.try_extract_tensor::<f32>()?;
        let (_, gamma) = gamma.try_extract_tensor::<f32>()?;
        let (_, beta) = beta.try_extract_tensor::<f32>()?;
        let bias = match &bias {
            Some(b) => Some(b.try_extract_tensor::<f32>()?.1),
            None => None,
        };
        let h = gamma.len();
        if h == 0 || x.len() % h != 0 || skip.len() != x.len() || beta.len() != h || bias.is_some_and(|b| b.len() != h)
        {
            return Err(kernel_error(op, "input shapes do not agree"));
        }
        let mut out = ctx.output(0, shape.to_vec())?.ok_or_else(|| kernel_error(op, "no output"))?;
        let (_, out) = out.try_extract_tensor_mut::<f32>()?;
        let params = NormParams { gamma, beta, bias, epsilon: self.epsilon };
        for_row_blocks(ctx, out, h, |first, block| {
            let range = first * h..first * h + block.len();
            skip_layer_norm(&x[range.clone()], &skip[range], &params, block)
        })
    }
}

struct BiasGelu;

struct BiasGeluKernel;

impl Operator for BiasGelu {
    type Kernel<'attr> = BiasGeluKernel;

    fn name(&self) -> &str {
        "BiasGelu"
    }

    fn inputs(&self) -> impl IntoIterator<Item = OperatorInput> {
        [OperatorInput::required(TensorElementType::Float32), OperatorInput::required(TensorElementType::Float32)]
    }

    fn outputs(&self) -> impl IntoIterator<Item = OperatorOutput> {
        [OperatorOutput::required(TensorElementType::Float32)]
    }

    fn create_kernel<'attr>(&self, _: &KernelContext<'attr>) -> ort::Result<BiasGeluKernel> {
        Ok(BiasGeluKernel)
    }
}

impl Kernel for BiasGeluKernel {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        let op = "BiasGelu";
        let input = |i: usize| ctx.input(i)?.ok_or_else(|| kernel_error(op, &format!("input {i} is missing")));
        let (x, bias) = (input(0)?, input(1)?);
        let (shape, x) = x.try_extract_tensor::<f32>()?;
        let (_, bias) = bias.try_extract_tensor::<f32>()?;
        if bias.is_empty() || x.len() % bias.len() != 0 {
            return Err(kernel_error(op, "input shapes do not agree"));
        }
        let mut out = ctx.output(0, shape.to_vec())?.ok_or_else(|| kernel_error(op, "no output"))?;
        let (_, out) = out.try_extract_tensor_mut::<f32>()?;
        let width = bias.len();
        for_row_blocks(ctx, out, width, |first, block| {
            bias_gelu(&x[first * width..first * width + block.len()], bias, block)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erf by its Taylor series (|x| < 3) or the complement's continued fraction, in f64.
    fn erf_reference(x: f64) -> f64 {
        let a = x.abs();
        let v = if a < 3.0 {
            let (mut term, mut sum, mut n) = (a, a, 0.0);
            while term.abs() > 1e-17 {
                n += 1.0;
                term *= -a * a / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = k as f64 / 2.0 / (a + f);
            }
            1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + f)
        };
        v.copysign(x)
    }

    #[test]
    fn erf_is_accurate_to_float_precision() {
        let mut worst = 0f64;
        for i in -8000..=8000 {
            let x = i as f32 / 1000.0;
            worst = worst.max((erf(x) as f64 - erf_reference(x as f64)).abs());
        }
        assert!(worst < 6e-7, "max |erf error| {worst}");
        // Abramowitz–Stegun leaves about 6e-8 at zero, whatever the rounding of the build
        assert!(erf(0.0).abs() < 1e-7);
        assert_eq!(erf(40.0), 1.0);
        assert_eq!(erf(-40.0), -1.0);
    }

    #[test]
    fn exp_matches_std_over_its_range() {
        for i in 0..=8_700 {
            let y = -(i as f32) / 100.0;
            let (got, want) = (exp_nonpositive(y) as f64, (y as f64).exp());
            assert!((got - want).abs() <= want * 3e-7 + 1e-38, "exp({y}) = {got}, want {want}");
        }
    }

    #[test]
    fn skip_layer_norm_matches_a_double_precision_reference() {
        let (rows, h) = (3usize, 384usize);
        let value = |seed: usize, i: usize| (((i * 7919 + seed * 104_729) % 1000) as f32 / 250.0) - 2.0;
        let x: Vec<f32> = (0..rows * h).map(|i| value(1, i)).collect();
        let skip: Vec<f32> = (0..rows * h).map(|i| value(2, i)).collect();
        let gamma: Vec<f32> = (0..h).map(|i| 1.0 + value(3, i) / 10.0).collect();
        let beta: Vec<f32> = (0..h).map(|i| value(4, i) / 10.0).collect();
        let bias: Vec<f32> = (0..h).map(|i| value(5, i) / 5.0).collect();
        let mut out = vec![0f32; rows * h];
        skip_layer_norm(
            &x,
            &skip,
            &NormParams { gamma: &gamma, beta: &beta, bias: Some(&bias), epsilon: 1e-12 },
            &mut out,
        );
        for r in 0..rows {
            let v: Vec<f64> = (0..h).map(|i| (x[r * h + i] + skip[r * h + i] + bias[i]) as f64).collect();
            let mean = v.iter().sum::<f64>() / h as f64;
            let var = v.iter().map(|a| (a - mean) * (a - mean)).sum::<f64>() / h as f64;
            for i in 0..h {
                let want = (v[i] - mean) / (var + 1e-12).sqrt() * gamma[i] as f64 + beta[i] as f64;
                assert!((out[r * h + i] as f64 - want).abs() < 1e-5, "row {r} col {i}");
            }
        }
    }

    #[test]
    fn bias_gelu_is_the_exact_gelu() {
        let x: Vec<f32> = (-600..600).map(|i| i as f32 / 100.0).collect();
        let bias = vec![0.25f32; 4];
        let mut out = vec![0f32; x.len()];
        bias_gelu(&x, &bias, &mut out);
        for (o, a) in out.iter().zip(&x) {
            let v = (*a + 0.25) as f64;
            let want = 0.5 * v * (1.0 + erf_reference(v / std::f64::consts::SQRT_2));
            assert!((*o as f64 - want).abs() < 1e-6, "gelu({v}) = {o}, want {want}");
        }
    }
}
