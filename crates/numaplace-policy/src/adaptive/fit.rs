//! Least squares for \[Bae12\] §5.2's linear
//! models: the per-class performance models (eight metrics in, the
//! interleaved / local run-time ratio out) and the Fig. 7 power model.

use serde::{Deserialize, Serialize};

/// `y = intercept + coefficients · x`, with its fit quality.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearModel {
    /// The constant term.
    pub intercept: f64,
    /// One coefficient per metric, in the metrics' order.
    pub coefficients: Vec<f64>,
    /// Coefficient of determination on the rows it was fitted to (§6.1
    /// reports 0.70-0.93 for the performance models).
    pub r2: f64,
    /// Rows it was fitted to.
    pub rows: usize,
    /// The range of targets it was fitted to: predictions are clamped to
    /// it, since a linear model extrapolates without bound beyond its
    /// training inputs (absent: no clamping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<(f64, f64)>,
}

impl LinearModel {
    /// The model's value at metrics `x`.
    pub fn predict(&self, x: &[f64]) -> f64 {
        let y = self.intercept
            + self
                .coefficients
                .iter()
                .zip(x)
                .map(|(c, v)| c * v)
                .sum::<f64>();
        match self.range {
            Some((lo, hi)) => y.clamp(lo, hi),
            None => y,
        }
    }
}

/// Why a fit failed.
#[derive(Debug, Clone, PartialEq)]
pub enum FitError {
    /// No rows to fit.
    NoRows,
    /// Rows of different lengths.
    Ragged,
    /// A value is NaN or infinite.
    NotFinite,
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitError::NoRows => write!(f, "no training rows to fit"),
            FitError::Ragged => write!(f, "training rows have different numbers of inputs"),
            FitError::NotFinite => write!(f, "a training value is not a finite number"),
        }
    }
}

impl std::error::Error for FitError {}

/// Ordinary least squares on standardised inputs, with a vanishing ridge
/// term (1e-9 of the row count) so that constant or collinear inputs
/// (common: r_wm and r_ww move together) still give a unique answer;
/// the coefficients are returned in the inputs' own units.
pub fn least_squares(xs: &[Vec<f64>], ys: &[f64]) -> Result<LinearModel, FitError> {
    ridge(xs, ys, 1e-9)
}

/// Least squares with a ridge penalty of `lambda` times the row count on
/// the standardised coefficients: with few distinct training workloads
/// (a class of 4 benchmarks and 9 coefficients) plain least squares fits
/// them exactly and predicts nonsense between them; the penalty keeps
/// only the directions the data support.
pub fn ridge(xs: &[Vec<f64>], ys: &[f64], lambda: f64) -> Result<LinearModel, FitError> {
    let n = xs.len();
    if n == 0 || ys.len() != n {
        return Err(FitError::NoRows);
    }
    let k = xs[0].len();
    if xs.iter().any(|x| x.len() != k) {
        return Err(FitError::Ragged);
    }
    if xs.iter().flatten().chain(ys).any(|v| !v.is_finite()) {
        return Err(FitError::NotFinite);
    }
    let nf = n as f64;
    let mean: Vec<f64> = (0..k)
        .map(|j| xs.iter().map(|x| x[j]).sum::<f64>() / nf)
        .collect();
    let scale: Vec<f64> = (0..k)
        .map(|j| {
            let v = xs.iter().map(|x| (x[j] - mean[j]).powi(2)).sum::<f64>() / nf;
            if v > 0.0 { v.sqrt() } else { 1.0 }
        })
        .collect();
    let ymean = ys.iter().sum::<f64>() / nf;
    // Normal equations (ZᵀZ + λI) b = Zᵀ(y − ȳ) on z = (x − mean) / scale.
    let mut a = vec![vec![0.0; k + 1]; k];
    for (x, y) in xs.iter().zip(ys) {
        let z: Vec<f64> = (0..k).map(|j| (x[j] - mean[j]) / scale[j]).collect();
        for i in 0..k {
            for j in 0..k {
                a[i][j] += z[i] * z[j];
            }
            a[i][k] += z[i] * (y - ymean);
        }
    }
    for (i, row) in a.iter_mut().enumerate() {
        row[i] += lambda.max(1e-9) * nf;
    }
    let b = solve(a);
    let coefficients: Vec<f64> = (0..k).map(|j| b[j] / scale[j]).collect();
    let intercept = ymean
        - coefficients
            .iter()
            .zip(&mean)
            .map(|(c, m)| c * m)
            .sum::<f64>();
    let mut model = LinearModel {
        intercept,
        coefficients,
        r2: 0.0,
        rows: n,
        range: None,
    };
    model.r2 = r_squared(&model, xs, ys);
    Ok(model)
}

/// 1 − SS_res / SS_tot; 1 when the targets are constant and met exactly.
pub fn r_squared(model: &LinearModel, xs: &[Vec<f64>], ys: &[f64]) -> f64 {
    let n = ys.len().max(1) as f64;
    let ymean = ys.iter().sum::<f64>() / n;
    let res: f64 = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - model.predict(x)).powi(2))
        .sum();
    let tot: f64 = ys.iter().map(|y| (y - ymean).powi(2)).sum();
    if tot <= f64::EPSILON * n {
        if res <= 1e-12 * n { 1.0 } else { 0.0 }
    } else {
        1.0 - res / tot
    }
}

/// Gaussian elimination with partial pivoting on an augmented matrix; a
/// zero pivot (impossible with the ridge term) gives a zero coefficient.
fn solve(mut a: Vec<Vec<f64>>) -> Vec<f64> {
    let k = a.len();
    for c in 0..k {
        let p = (c..k)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .unwrap_or(c);
        a.swap(c, p);
        if a[c][c].abs() < 1e-300 {
            continue;
        }
        let pivot = a[c].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != c {
                let f = row[c] / pivot[c];
                for (v, p) in row.iter_mut().zip(&pivot).skip(c) {
                    *v -= f * p;
                }
            }
        }
    }
    (0..k)
        .map(|i| {
            if a[i][i].abs() < 1e-300 {
                0.0
            } else {
                a[i][k] / a[i][i]
            }
        })
        .collect()
}
