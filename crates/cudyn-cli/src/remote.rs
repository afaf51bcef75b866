//! The compile cache's remote tier as `cudyn doctor` and `cudyn cache stats` report it: whether
//! `CUDYN_CACHE_REMOTE` names one, whether it is refused and why, and whether it answers.

use cudyn::cache::{Remote, RemoteConfig, REMOTE_ENV};

/// What was found of the remote tier the environment configures.
#[derive(Debug, serde::Serialize)]
pub struct RemoteCheck {
    /// The remote's URL, its password hidden.
    pub url: String,
    /// How long a `PING` took, in milliseconds, when it answered.
    pub answers_in_ms: Option<f64>,
    /// Why it is not used, or does not answer.
    pub problem: Option<String>,
}

impl RemoteCheck {
    /// The remote tier `CUDYN_CACHE_REMOTE` names, checked; `None` when it names none.
    pub fn from_environment() -> Option<RemoteCheck> {
        let url = std::env::var(REMOTE_ENV)
            .ok()
            .filter(|url| !url.is_empty())?;
        let config = match RemoteConfig::from_environment() {
            Ok(config) => config?,
            Err(error) => {
                return Some(RemoteCheck {
                    url,
                    answers_in_ms: None,
                    problem: Some(error.to_string()),
                })
            }
        };
        let url = config.url();
        let answered = Remote::new(config)
            .map_err(|error| error.to_string())
            .and_then(|remote| remote.ping());
        Some(match answered {
            Ok(took) => RemoteCheck {
                url,
                answers_in_ms: Some(took.as_secs_f64() * 1e3),
                problem: None,
            },
            Err(why) => RemoteCheck {
                url,
                answers_in_ms: None,
                problem: Some(format!("it does not answer: {why}")),
            },
        })
    }

    /// One line: the URL and whether it answers.
    pub fn line(&self) -> String {
        match (&self.answers_in_ms, &self.problem) {
            (Some(ms), _) => format!("{} answers ({ms:.2} ms)", self.url),
            (None, Some(problem)) => format!("{}: {problem}", self.url),
            (None, None) => self.url.clone(),
        }
    }
}
