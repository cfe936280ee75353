package streamlab;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/** Minimal {@code --key value} (or {@code --key=value}) parser that rejects unknown and missing options. */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] args, Set<String> known) {
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--") || arg.length() == 2) {
                throw new IllegalArgumentException("expected --option, got: " + arg);
            }
            String name = arg.substring(2);
            String value;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new IllegalArgumentException("missing value for --" + name);
            }
            if (!known.contains(name)) {
                throw new IllegalArgumentException("unknown option --" + name + " (known: " + known + ")");
            }
            values.put(name, value);
        }
    }

    String required(String name) {
        String value = values.get(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("missing required option --" + name);
        }
        return value;
    }

    String get(String name, String fallback) {
        return values.getOrDefault(name, fallback);
    }

    boolean has(String name) {
        return values.containsKey(name);
    }

    int getInt(String name, int fallback) {
        if (!has(name)) {
            return fallback;
        }
        try {
            return Integer.parseInt(values.get(name).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " must be an integer, got: " + values.get(name));
        }
    }

    long getLong(String name, long fallback) {
        if (!has(name)) {
            return fallback;
        }
        try {
            return Long.parseLong(values.get(name).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + " must be an integer, got: " + values.get(name));
        }
    }

    /** Only {@code true} or {@code false} (any case): a typo must not silently mean false. */
    boolean getBoolean(String name, boolean fallback) {
        if (!has(name)) {
            return fallback;
        }
        String value = values.get(name).trim();
        if (value.equalsIgnoreCase("true")) {
            return true;
        }
        if (value.equalsIgnoreCase("false")) {
            return false;
        }
        throw new IllegalArgumentException("--" + name + " must be true or false, got: " + values.get(name));
    }

    /** One of {@code allowed} (compared lower-case); returns the lower-case value. */
    String getChoice(String name, String fallback, Set<String> allowed) {
        if (!has(name)) {
            return fallback;
        }
        String value = values.get(name).trim().toLowerCase(java.util.Locale.ROOT);
        if (!allowed.contains(value)) {
            throw new IllegalArgumentException("--" + name + " must be one of " + allowed + ", got: " + values.get(name));
        }
        return value;
    }
}
