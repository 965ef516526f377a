//! Statistics of repeated measurements.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The median of `v` (the mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// What N repetitions of one measurement say together: the mean with its sample
/// standard deviation and 95% confidence interval (Student's t, N - 1 degrees of
/// freedom: the repetitions are few and their spread is estimated from themselves),
/// and the median and range, which a noisy machine's outliers move less.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Repetitions.
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (divided by N - 1); absent for one repetition.
    pub std_dev: Option<f64>,
    /// Half the width of the 95% confidence interval of the mean: `t(0.975, N - 1) *
    /// std_dev / sqrt(N)`; absent for one repetition.
    pub ci95_half_width: Option<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// The summary of `values`; `None` when there are none or one is not finite.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let spread = (n > 1).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let sd = var.sqrt();
            (sd, student_t_975(n - 1) * sd / (n as f64).sqrt())
        });
        Some(Summary {
            n,
            mean,
            std_dev: spread.map(|s| s.0),
            ci95_half_width: spread.map(|s| s.1),
            median: median(values),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// The 95% confidence interval of the mean.
    pub fn ci95(&self) -> Option<(f64, f64)> {
        self.ci95_half_width.map(|h| (self.mean - h, self.mean + h))
    }

    /// The interval's half width as a fraction of the mean (seed 003 asks for at most
    /// 0.05); `None` for one repetition or a mean of zero.
    pub fn relative_ci95(&self) -> Option<f64> {
        self.ci95_half_width
            .filter(|_| self.mean != 0.0)
            .map(|h| h / self.mean.abs())
    }
}

/// A straight line fitted to points by least squares (`y = intercept + slope * x`),
/// with the 95% confidence interval of its slope: how a cost per step (cycles per hop)
/// is told apart from the noise of the measurements it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineFit {
    pub slope: f64,
    pub intercept: f64,
    /// `slope ± t(0.975, N - 2) * se(slope)`; absent with two points (no residual to
    /// estimate the spread from).
    pub slope_ci95: Option<(f64, f64)>,
}

impl LineFit {
    /// The fit of `points` (x, y); `None` with fewer than two distinct x, or a value
    /// that is not finite.
    pub fn of(points: &[(f64, f64)]) -> Option<LineFit> {
        if points.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
            return None;
        }
        let n = points.len() as f64;
        let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        if points.len() < 2 || sxx == 0.0 {
            return None;
        }
        let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        let slope = sxy / sxx;
        let intercept = mean_y - slope * mean_x;
        let slope_ci95 = (points.len() > 2).then(|| {
            let residuals: f64 = points.iter().map(|p| (p.1 - intercept - slope * p.0).powi(2)).sum();
            let se = (residuals / (n - 2.0) / sxx).sqrt();
            let half = student_t_975(points.len() - 2) * se;
            (slope - half, slope + half)
        });
        Some(LineFit {
            slope,
            intercept,
            slope_ci95,
        })
    }

    /// Whether the slope's interval holds zero: the data cannot tell it from none.
    pub fn slope_indistinct_from_zero(&self) -> bool {
        self.slope_ci95.is_some_and(|(lo, hi)| lo <= 0.0 && hi >= 0.0)
    }
}

/// The two-sided 95% quantile of Student's t with `freedom` degrees of freedom.
fn student_t_975(freedom: usize) -> f64 {
    StudentsT::new(0.0, 1.0, freedom as f64)
        .expect("one degree of freedom at least")
        .inverse_cdf(0.975)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-4 * b.abs().max(1.0)
    }

    #[test]
    fn five_repetitions_by_hand() {
        // mean 14, squares of deviations 16+4+0+4+16 = 40, sample variance 40/4 = 10,
        // t(0.975, 4) = 2.776445 (tables), half width 2.776445 * sqrt(10) / sqrt(5).
        let s = Summary::of(&[18.0, 10.0, 14.0, 12.0, 16.0]).unwrap();
        assert_eq!(s.n, 5);
        assert!(close(s.mean, 14.0));
        assert!(close(s.std_dev.unwrap(), 10f64.sqrt()));
        assert!(close(s.ci95_half_width.unwrap(), 2.776445 * 2f64.sqrt()), "{s:?}");
        let (lo, hi) = s.ci95().unwrap();
        assert!(close(lo, 14.0 - 3.926443) && close(hi, 14.0 + 3.926443));
        assert!(close(s.relative_ci95().unwrap(), 3.926443 / 14.0));
        assert_eq!((s.median, s.min, s.max), (14.0, 10.0, 18.0));
    }

    #[test]
    fn a_line_fit_by_hand() {
        // x 1,2,3; y 10,14,21: means 2, 15; sxx 2, sxy 11; slope 5.5, intercept 4;
        // residuals 0.5, -1, 0.5: 1.5 over 1 freedom; se sqrt(1.5 / 2); t(0.975, 1) 12.706205.
        let f = LineFit::of(&[(1.0, 10.0), (2.0, 14.0), (3.0, 21.0)]).unwrap();
        assert!(close(f.slope, 5.5) && close(f.intercept, 4.0), "{f:?}");
        let half = 12.706205 * (0.75f64).sqrt();
        let (lo, hi) = f.slope_ci95.unwrap();
        assert!(close(lo, 5.5 - half) && close(hi, 5.5 + half), "{f:?}");
        assert!(f.slope_indistinct_from_zero(), "an interval of ±11 holds zero");
        // A clear slope: the interval stays above zero.
        let f = LineFit::of(&[(1.0, 100.0), (2.0, 200.0), (3.0, 301.0), (1.0, 101.0), (3.0, 299.0)]).unwrap();
        assert!(
            !f.slope_indistinct_from_zero() && f.slope_ci95.unwrap().0 > 90.0,
            "{f:?}"
        );
        // Two points: a line, no interval; one x: no line.
        assert_eq!(LineFit::of(&[(1.0, 1.0), (3.0, 5.0)]).unwrap().slope_ci95, None);
        assert!(LineFit::of(&[(2.0, 1.0), (2.0, 5.0)]).is_none());
        assert!(LineFit::of(&[(1.0, f64::NAN), (2.0, 5.0)]).is_none());
    }

    #[test]
    fn quantiles_match_the_tables() {
        // Student's t, two-sided 95%: df 1, 2, 9 (ten repetitions, seed 001), 29, 1000.
        for (df, t) in [
            (1, 12.706205),
            (2, 4.302653),
            (9, 2.262157),
            (29, 2.045230),
            (1000, 1.962339),
        ] {
            assert!(close(student_t_975(df), t), "df {df}: {}", student_t_975(df));
        }
    }

    #[test]
    fn one_repetition_has_no_spread_and_bad_values_no_summary() {
        let s = Summary::of(&[3.5]).unwrap();
        assert_eq!((s.n, s.mean, s.median, s.min, s.max), (1, 3.5, 3.5, 3.5, 3.5));
        assert_eq!(
            (s.std_dev, s.ci95_half_width, s.ci95(), s.relative_ci95()),
            (None, None, None, None)
        );
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        // Identical repetitions: no spread, an interval of width 0.
        let s = Summary::of(&[2.0, 2.0, 2.0]).unwrap();
        assert_eq!((s.std_dev, s.ci95_half_width), (Some(0.0), Some(0.0)));
    }
}
