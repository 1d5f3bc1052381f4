//! Collects every error a derive finds, so that one compile reports them all.

use std::fmt::Display;

use quote::ToTokens;

/// The errors found so far, combined into one `syn::Error` as they arrive.
#[derive(Default)]
pub(crate) struct Errors {
    combined: Option<syn::Error>,
}

impl Errors {
    pub(crate) fn new() -> Self {
        Errors::default()
    }

    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.combined {
            Some(combined) => combined.combine(error),
            None => self.combined = Some(error),
        }
    }

    /// Records `message`, pointing from the first to the last token of `tokens`.
    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records `error` and yields nothing, for `return errors.refuse(...)`.
    pub(crate) fn refuse<T>(&mut self, error: syn::Error) -> Option<T> {
        self.push(error);
        None
    }

    /// [`Errors::spanned`], yielding nothing.
    pub(crate) fn refuse_spanned<T>(
        &mut self,
        tokens: impl ToTokens,
        message: impl Display,
    ) -> Option<T> {
        self.spanned(tokens, message);
        None
    }

    /// `Err` with every recorded error, or `Ok` if there were none.
    pub(crate) fn check(self) -> syn::Result<()> {
        match self.combined {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}
