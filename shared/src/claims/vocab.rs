//! The words [`super::check`] reads an answer by: per language, the verbs of
//! a change in the form that says it happened (past participle or past
//! tense) and in the form a denial uses ("could not *delete*"), the words
//! that negate a verb, and the phrases that make a clause an offer, a
//! condition, a plan or a quote of the user rather than a report. English
//! first; German, Spanish and French for the common verbs. A form ending in
//! `*` matches as a prefix (inflected participles: "eliminad*" for
//! eliminado/eliminada/eliminados).

use crate::entities::OperationAction::{self, Create, Delete, Update};

/// A language's words.
pub(super) struct Lang {
    /// Forms that report a change as done.
    pub done: &'static [(&'static str, OperationAction)],
    /// Forms that only a denial makes a statement of ("did not *delete*").
    pub plain: &'static [(&'static str, OperationAction)],
    /// Words that negate a verb within [`NEGATION_WINDOW`] words before it.
    pub negations: &'static [&'static str],
    /// When not empty: a participle reports only after one of these
    /// auxiliaries in its clause ("ha sido *eliminado*"; "tus eventos
    /// *programados*" is an adjective).
    pub auxiliaries: &'static [&'static str],
    /// A participle right after one of these is an adjective ("your
    /// *scheduled* meetings"), not a report.
    pub determiners: &'static [&'static str],
    /// A participle after one of these phrases in its clause describes what
    /// is there ("you have a meeting *scheduled* for Sunday", "there is
    /// already a review *scheduled*"), not a change made: unless "been",
    /// "now" or "just" stands in the four words before it.
    pub states: &'static [&'static str],
}

/// How many words before a verb a negation still applies to it.
pub(super) const NEGATION_WINDOW: usize = 5;

pub(super) const LANGS: &[Lang] = &[ENGLISH, GERMAN, SPANISH, FRENCH];

const ENGLISH: Lang = Lang {
    done: &[
        ("cancelled", Delete),
        ("canceled", Delete),
        ("deleted", Delete),
        ("removed", Delete),
        ("created", Create),
        ("added", Create),
        ("booked", Create),
        ("scheduled", Create),
        // Not "blocked" (the local model's "found an hour and blocked it"
        // after no create): in a project "X is blocked by Y" is an edge.
        ("reserved", Create),
        ("moved", Update),
        ("rescheduled", Update),
        ("renamed", Update),
        ("changed", Update),
        ("updated", Update),
        ("edited", Update),
        ("modified", Update),
        ("postponed", Update),
        ("marked", Update),
    ],
    plain: &[
        ("cancel", Delete),
        ("delete", Delete),
        ("remove", Delete),
        ("create", Create),
        ("add", Create),
        ("book", Create),
        ("schedule", Create),
        ("reserve", Create),
        ("move", Update),
        ("reschedule", Update),
        ("rename", Update),
        ("change", Update),
        ("update", Update),
        ("edit", Update),
        ("modify", Update),
        ("postpone", Update),
    ],
    negations: &["not", "never", "nothing", "unable", "failed", "cannot", "n't*"],
    auxiliaries: &[],
    determiners: &[
        "the", "a", "an", "your", "my", "our", "their", "its", "this", "that", "these", "those", "any", "all", "newly",
    ],
    // The local model's true answers to "anything this week?" and "am I free
    // Friday?" were withdrawn as claims for these (issue 40).
    states: &[
        " you have ",
        " you've got ",
        " you have got ",
        " you've ",
        " there is ",
        " there's ",
        " there are ",
        " already ",
        " i see ",
        " i found ",
        " your calendar has ",
        " you are ",
        " you're ",
    ],
};

const GERMAN: Lang = Lang {
    done: &[
        ("gelöscht*", Delete),
        ("entfernt*", Delete),
        ("abgesagt*", Delete),
        ("storniert*", Delete),
        ("erstellt*", Create),
        ("angelegt*", Create),
        ("hinzugefügt*", Create),
        ("gebucht*", Create),
        ("eingetragen*", Create),
        ("verschoben*", Update),
        ("umbenannt*", Update),
        ("geändert*", Update),
        ("aktualisiert*", Update),
    ],
    plain: &[
        ("löschen", Delete),
        ("entfernen", Delete),
        ("absagen", Delete),
        ("stornieren", Delete),
        ("erstellen", Create),
        ("anlegen", Create),
        ("hinzufügen", Create),
        ("buchen", Create),
        ("eintragen", Create),
        ("verschieben", Update),
        ("umbenennen", Update),
        ("ändern", Update),
        ("aktualisieren", Update),
    ],
    negations: &["nicht", "nie", "nichts", "kein*"],
    auxiliaries: &["habe", "hat", "haben", "hast", "habt", "wurde", "wurden", "ist", "sind"],
    determiners: &[],
    states: &[],
};

const SPANISH: Lang = Lang {
    done: &[
        ("eliminad*", Delete),
        ("borrad*", Delete),
        ("cancelad*", Delete),
        ("cread*", Create),
        ("añadid*", Create),
        ("agregad*", Create),
        ("reservad*", Create),
        ("programad*", Create),
        ("movid*", Update),
        ("reprogramad*", Update),
        ("renombrad*", Update),
        ("cambiad*", Update),
        ("actualizad*", Update),
        ("modificad*", Update),
    ],
    plain: &[
        ("eliminar", Delete),
        ("borrar", Delete),
        ("cancelar", Delete),
        ("crear", Create),
        ("añadir", Create),
        ("agregar", Create),
        ("reservar", Create),
        ("programar", Create),
        ("mover", Update),
        ("reprogramar", Update),
        ("renombrar", Update),
        ("cambiar", Update),
        ("actualizar", Update),
        ("modificar", Update),
    ],
    negations: &["no", "nunca", "nada", "ningún", "ninguna"],
    auxiliaries: &["he", "ha", "has", "hemos", "han", "sido", "fue", "fueron", "está", "están", "quedado"],
    determiners: &[],
    states: &[],
};

const FRENCH: Lang = Lang {
    done: &[
        ("supprimé*", Delete),
        ("annulé*", Delete),
        ("créé*", Create),
        ("ajouté*", Create),
        ("réservé*", Create),
        ("planifié*", Create),
        ("programmé*", Create),
        ("déplacé*", Update),
        ("renommé*", Update),
        ("modifié*", Update),
        ("changé*", Update),
    ],
    plain: &[
        ("supprimer", Delete),
        ("annuler", Delete),
        ("créer", Create),
        ("ajouter", Create),
        ("réserver", Create),
        ("planifier", Create),
        ("déplacer", Update),
        ("renommer", Update),
        ("modifier", Update),
        ("changer", Update),
    ],
    negations: &["pas", "jamais", "rien", "ne", "n'*"],
    auxiliaries: &["ai", "j'ai", "a", "as", "avons", "avez", "ont", "été", "est", "sont"],
    determiners: &[],
    states: &[],
};

/// A clause holding one of these (padded with spaces, lowercase) offers,
/// asks, plans or conditions a change, or quotes the user: it reports
/// nothing as done.
pub(super) const NOT_A_REPORT: &[&str] = &[
    // English
    " if ",
    " would ",
    " could ",
    " can ",
    " shall ",
    " should ",
    " will ",
    "'ll ",
    " want ",
    " once ",
    " when you",
    " approv",
    " pending",
    " going to ",
    " ready to ",
    " you asked",
    " you said",
    " you wanted",
    " you requested",
    " you'd like",
    // German
    " wenn ",
    " falls ",
    " soll ",
    " sollen ",
    " möchtest ",
    " möchten ",
    " wird ",
    " werde ",
    " würde ",
    " kann ",
    " genehmig",
    // Spanish
    " si ",
    " quieres ",
    " quiere ",
    " puedo ",
    " podría ",
    " será ",
    " voy a ",
    " aprob",
    // French
    " voulez",
    " veux ",
    " peux ",
    " pourrais ",
    " sera ",
    " vais ",
    " approuv",
];

/// A clause holding one of these is a condition: it neither reports nor denies.
pub(super) const CONDITIONS: &[&str] = &[" if ", " unless ", " wenn ", " falls ", " si "];

/// Phrases that say nothing at all was changed.
pub(super) const NOTHING_CHANGED: &[&str] = &[
    "no changes",
    "no change was",
    "nothing was changed",
    "nothing has been changed",
    "nothing changed",
    "didn't change anything",
    "did not change anything",
    "haven't changed anything",
    "have not changed anything",
    "keine änderung",
    "nichts geändert",
    "ningún cambio",
    "no se realizaron cambios",
    "no he hecho ningún cambio",
    "aucun changement",
    "aucune modification",
    "rien n'a été modifié",
];

/// Words that join the items of one clause into the next ("and", lists):
/// the clause splits there, and a part without a verb takes its
/// neighbour's.
pub(super) const JOINERS: &[&str] = &[
    " and ",
    " but ",
    " however ",
    " although ",
    " though ",
    " und ",
    " aber ",
    " jedoch ",
    " y ",
    " pero ",
    " et ",
    " mais ",
    ", ",
];

/// Whether `word` is `form` (`form*`: starts with it).
pub(super) fn matches(word: &str, form: &str) -> bool {
    match form.strip_suffix('*') {
        // Negations glued to their verb: "couldn't", "n'ai".
        Some(stem) if stem.starts_with("n'") => word.starts_with(stem) || word.ends_with(stem),
        Some(stem) => word.starts_with(stem),
        None => word == form,
    }
}
