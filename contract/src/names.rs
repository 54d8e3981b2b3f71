//! The one way a closed enum gets its wire names (the contract's, and the queue's own): [`wire_names!`] writes
//! `ALL` and `NAMES` (in declaration order), `as_str`, `Display` and `FromStr` from one list
//! of `Variant = "name"`, instead of a match, an array and a parser kept equal by hand.
//! Serde keeps its own derive (utoipa reads its attributes); `tests` checks that both
//! spell every enum alike.

/// `wire_names!(Type, "what it is", exact|lenient { Variant = "name", ... })`.
///
/// `exact` parses only the name itself. `lenient` also takes other cases and surrounding
/// spaces, for values people type (forms, env files); the output is always the name.
#[macro_export]
macro_rules! wire_names {
    ($ty:ident, $what:literal, $parse:ident { $($variant:ident = $name:literal),+ $(,)? }) => {
        impl $ty {
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];
            pub const NAMES: [&'static str; [$($name),+].len()] = [$($name),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl ::core::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::core::str::FromStr for $ty {
            type Err = $crate::modes::ParseModeError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $ty::ALL
                    .into_iter()
                    .find(|v| $crate::wire_names!(@matches $parse, v.as_str(), s))
                    .ok_or_else(|| $crate::modes::ParseModeError {
                        kind: $what,
                        value: s.to_string(),
                        accepted: &$ty::NAMES,
                    })
            }
        }
    };
    (@matches exact, $name:expr, $s:expr) => {
        $name == $s
    };
    (@matches lenient, $name:expr, $s:expr) => {
        $name.eq_ignore_ascii_case($s.trim())
    };
}

#[cfg(test)]
mod tests {
    use crate::events::CancelledBy;
    use crate::{EventLevel, JobState, JobType, PublishMode, RuntimeMode, StageState, StepState};

    /// Serde's derive and `wire_names!` must spell each value alike, both ways.
    fn spelled_alike<T>(all: &[T])
    where
        T: Copy + std::fmt::Debug + PartialEq + serde::Serialize + serde::de::DeserializeOwned,
        T: std::fmt::Display + std::str::FromStr,
        <T as std::str::FromStr>::Err: std::fmt::Debug,
    {
        for value in all {
            let name = value.to_string();
            assert_eq!(serde_json::to_value(value).unwrap(), name, "{value:?}");
            assert_eq!(
                serde_json::from_value::<T>(name.clone().into()).unwrap(),
                *value
            );
            assert_eq!(name.parse::<T>().unwrap(), *value);
        }
    }

    #[test]
    fn serde_and_the_wire_names_spell_every_enum_alike() {
        spelled_alike(&JobType::ALL);
        spelled_alike(&JobState::ALL);
        spelled_alike(&EventLevel::ALL);
        spelled_alike(&RuntimeMode::ALL);
        spelled_alike(&PublishMode::ALL);
        spelled_alike(&StepState::ALL);
        spelled_alike(&StageState::ALL);
        spelled_alike(&CancelledBy::ALL);
        spelled_alike(&crate::session::SessionLoss::ALL);
    }

    #[test]
    fn exact_names_refuse_other_cases_and_lenient_ones_take_them() {
        assert!("Queued".parse::<JobState>().is_err());
        assert_eq!(
            " Claude ".parse::<RuntimeMode>().unwrap(),
            RuntimeMode::Claude
        );
        let refused = "nope".parse::<PublishMode>().unwrap_err();
        assert_eq!(refused.accepted, &["none", "branch", "pr"]);
        assert_eq!(refused.kind, "publish mode");
    }
}
