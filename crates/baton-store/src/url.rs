//! Database URLs as they may be shown: in errors, logs and `doctor` output.

/// The URL with any password replaced by `***`: in the user info (everything before the first
/// `@`, as the driver reads it, so a password may hold `/`, `?` or `#`) and in a `password=`
/// parameter. When unsure it hides more, never less.
pub fn redact_url(url: &str) -> String {
    fn redact_params(rest: &str) -> String {
        match rest.split_once('?') {
            None => rest.to_owned(),
            Some((base, query)) => {
                let params: Vec<_> = query
                    .split('&')
                    .map(|p| {
                        if p.to_ascii_lowercase().starts_with("password=") {
                            "password=***"
                        } else {
                            p
                        }
                    })
                    .collect();
                format!("{base}?{}", params.join("&"))
            }
        }
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return redact_params(url);
    };
    match rest.split_once('@') {
        Some((userinfo, after)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let hidden = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                user.to_owned()
            };
            format!("{scheme}://{hidden}@{}", redact_params(after))
        }
        None => format!("{scheme}://{}", redact_params(rest)),
    }
}
