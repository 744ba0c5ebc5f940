# Lifetime rules of custom layer callbacks: each case of ncnn's own binding
# tests, with R closures, weak references and gc().
skip_if_not_installed("rlang")

for (kind in c("name", "index")) {
  test_that(paste("a fresh net per registration releases its layer on collection -", kind), {
    for (i in 0:19) {
      f <- ncnn_factory(i)
      net <- ncnn_net(num_threads = 1)
      ncnn_register(net, f, kind)
      ncnn_load(net, kind)
      ncnn_infer(net, i + 1)
      rm(net)
      ncnn_gc()
      expect_equal(f$destroyed, 1L)
      expect_length(f$layers, 0L)
    }
  })

  test_that(paste("independent live nets keep their own callbacks -", kind), {
    nets <- list()
    fs <- list()
    for (i in 0:19) {
      net <- ncnn_net(num_threads = 1)
      f <- ncnn_factory(i)
      ncnn_register(net, f, kind)
      ncnn_load(net, kind)
      nets[[i + 1]] <- net
      fs[[i + 1]] <- f
    }
    rm(net, f)
    ncnn_gc()
    for (i in 0:19) {
      ncnn_infer(nets[[i + 1]], i + 1)
      nets[[i + 1]]$clear()
      expect_equal(fs[[i + 1]]$destroyed, 1L)
    }
    for (i in 0:19) {
      ncnn_load(nets[[i + 1]], kind)
      ncnn_infer(nets[[i + 1]], i + 1)
      nets[[i + 1]]$clear()
      expect_equal(fs[[i + 1]]$destroyed, 2L)
    }
  })

  test_that(paste("many custom layer types in one net -", kind), {
    net <- ncnn_net(num_threads = 1)
    fs <- lapply(0:19, ncnn_factory)
    for (i in 0:19) ncnn_register(net, fs[[i + 1]], kind, i)
    for (i in 0:19) {
      ncnn_load(net, kind, i)
      ncnn_infer(net, i + 1)
    }
    net$clear()
    expect_true(all(vapply(fs, function(f) f$destroyed == 1L, logical(1))))
  })

  test_that(paste("callbacks live until the net is destroyed, not cleared -", kind), {
    net <- ncnn_net(num_threads = 1)
    f <- ncnn_factory(3)
    ref <- rlang::new_weakref(f)
    ncnn_register(net, f, kind)
    rm(f)
    ncnn_gc()
    expect_true(ncnn_alive(ref))
    ncnn_load(net, kind)
    ncnn_infer(net, 4)
    net$clear()
    ncnn_gc()
    expect_true(ncnn_alive(ref))
    ncnn_load(net, kind)
    ncnn_infer(net, 4)
    # destruction runs the destroyer through the registration
    f2 <- rlang::wref_key(ref)
    expect_equal(f2$destroyed, 1L)
    rm(net)
    ncnn_gc()
    expect_equal(f2$destroyed, 2L)
    rm(f2)
    ncnn_gc()
    expect_false(ncnn_alive(ref))
  })

  test_that(paste("an extractor keeps its net and callbacks alive -", kind), {
    net <- ncnn_net(num_threads = 1)
    f <- ncnn_factory(5)
    ref <- rlang::new_weakref(f)
    ncnn_register(net, f, kind)
    ncnn_load(net, kind)
    ex <- net$create_extractor()
    rm(net, f)
    ncnn_gc()
    expect_true(ncnn_alive(ref))
    ex$input(0, 1)
    expect_equal(ex$extract(1)[1], 6)
    rm(ex)
    ncnn_gc()
    expect_false(ncnn_alive(ref))
  })

  test_that(paste("re-registering after clear() replaces the callbacks -", kind), {
    net <- ncnn_net(num_threads = 1)
    fs <- list()
    for (i in 0:19) {
      f <- ncnn_factory(i)
      fs[[i + 1]] <- f
      ncnn_register(net, f, kind)
      ncnn_load(net, kind)
      ncnn_infer(net, i + 1)
      net$clear()
      expect_equal(f$destroyed, 1L)
    }
    expect_true(all(vapply(fs, function(f) length(f$layers) == 0L, logical(1))))
  })

  test_that(paste("a superseded registration lives only while its layers do -", kind), {
    # The current destroyer also destroys layers made by an earlier creator.
    compatible <- function(increment) {
      f <- ncnn_factory(increment)
      f$destroy <- function(layer) {
        i <- Position(function(l) identical(l, layer), f$layers)
        if (!is.na(i)) f$layers[[i]] <- NULL
        f$destroyed <- f$destroyed + 1L
      }
      f
    }
    net <- ncnn_net(num_threads = 1)
    previous <- compatible(1)
    previous_ref <- rlang::new_weakref(previous)
    ncnn_register(net, previous, kind)
    ncnn_load(net, kind)
    rm(previous)
    intermediate_ref <- NULL
    for (increment in 2:8) {
      current <- compatible(increment)
      current_ref <- rlang::new_weakref(current)
      ncnn_register(net, current, kind)
      rm(current)
      ncnn_gc()
      expect_true(ncnn_alive(previous_ref))
      if (!is.null(intermediate_ref)) expect_false(ncnn_alive(intermediate_ref))
      intermediate_ref <- current_ref
    }
    ncnn_infer(net, 2)
    net$clear()
    ncnn_gc()
    expect_false(ncnn_alive(previous_ref))
    expect_equal(rlang::wref_key(current_ref)$destroyed, 1L)
    ncnn_load(net, kind)
    ncnn_infer(net, 9)
    net$clear()
    expect_length(rlang::wref_key(current_ref)$layers, 0L)
    expect_equal(rlang::wref_key(current_ref)$destroyed, 2L)
    rm(net)
    ncnn_gc()
    expect_false(ncnn_alive(current_ref))
  })
}

for (index in c(-1, 1000000 + 256)) {
  test_that(paste("a rejected registration keeps nothing - index", index), {
    net <- ncnn_net(num_threads = 1)
    active <- ncnn_factory(2)
    active_ref <- rlang::new_weakref(active)
    ncnn_register(net, active, "name")
    rm(active)
    f <- ncnn_factory(1)
    ref <- rlang::new_weakref(f)
    expect_error(net$register_custom_layer(index, f$create, f$destroy), class = "ncnn_error")
    rm(f)
    ncnn_gc()
    expect_false(ncnn_alive(ref))
    expect_true(ncnn_alive(active_ref))
    rm(net)
    ncnn_gc()
    expect_false(ncnn_alive(active_ref))
  })
}

cases <- list(
  list("CustomLayer0", "CustomLayer0", "CustomLayer0"),
  list(256, 256, NA),
  list("CustomLayer0", 256, "CustomLayer0"),
  list("Input", 16, "Input"),
  list(16, "Input", "Input")
)
for (case in cases) {
  test_that(paste("re-registration releases the superseded callbacks -", case[[1]], "then", case[[2]]), {
    net <- ncnn_net(num_threads = 1)
    previous <- ncnn_factory(1)
    ref <- rlang::new_weakref(previous)
    net$register_custom_layer(case[[1]], previous$create, previous$destroy)
    rm(previous)
    current <- ncnn_factory(2)
    net$register_custom_layer(case[[2]], current$create, current$destroy)
    ncnn_gc()
    expect_false(ncnn_alive(ref))
    type_name <- case[[3]]
    if (identical(type_name, "Input")) {
      net$load_param_mem("7767517\n1 1\nInput data 0 1 data\n")
      net$load_model(ncnn_datareader_empty())
      expect_true(net$layers()$custom)
    } else {
      # a name -> index replacement keeps the slot's name
      ncnn_load(net, if (is.na(type_name)) "index" else "name")
      ncnn_infer(net, 3)
    }
    net$clear()
    expect_equal(current$destroyed, 1L)
  })
}

test_that("a new name whose slot would carry the custom bit is rejected", {
  net <- ncnn_net(num_threads = 1)
  refs <- list()
  for (i in 0:255) {
    f <- ncnn_factory(i)
    refs[[i + 1]] <- rlang::new_weakref(f)
    ncnn_register(net, f, "name", i)
  }
  rm(f)
  ncnn_gc()
  expect_true(all(vapply(refs, ncnn_alive, logical(1))))
  rejected <- ncnn_factory(300)
  rejected_ref <- rlang::new_weakref(rejected)
  err <- expect_error(
    net$register_custom_layer("CustomLayer256", rejected$create, rejected$destroy),
    class = "ncnn_error"
  )
  expect_match(conditionMessage(err), "cannot be encoded")
  rm(rejected)
  ncnn_gc()
  expect_false(ncnn_alive(rejected_ref))
  expect_true(all(vapply(refs, ncnn_alive, logical(1))))
  ncnn_load(net, "name")
  ncnn_infer(net, 1)
  net$clear()
  expect_equal(rlang::wref_key(refs[[1]])$destroyed, 1L)
})

for (index in c(253, 254, 255)) {
  for (replacement in c("name", "index")) {
    test_that(sprintf("boundary slot %d loads after a %s replacement", index, replacement), {
      net <- ncnn_net(num_threads = 1)
      refs <- list()
      for (i in 0:index) {
        f <- ncnn_factory(i)
        refs[[i + 1]] <- rlang::new_weakref(f)
        ncnn_register(net, f, "name", i)
      }
      rm(f)
      current <- ncnn_factory(300)
      ncnn_register(net, current, replacement, index)
      ncnn_gc()
      expect_false(ncnn_alive(refs[[index + 1]]))
      expect_true(all(vapply(refs[seq_len(index)], ncnn_alive, logical(1))))
      ncnn_load(net, "name", index)
      ncnn_infer(net, 301)
      net$clear()
      expect_equal(current$destroyed, 1L)
      expect_length(current$layers, 0L)
      ncnn_load(net, "name", index)
      ncnn_infer(net, 301)
      net$clear()
      expect_equal(current$destroyed, 2L)
    })
  }
}

for (index in c(0, 254, 255, 512)) {
  test_that(paste("index registration sets where new names go - index", index), {
    net <- ncnn_net(num_threads = 1)
    indexed <- ncnn_factory(1)
    ncnn_register(net, indexed, "index", index)
    named <- ncnn_factory(2)
    ref <- rlang::new_weakref(named)
    next_index <- index + 1
    if (bitwAnd(next_index, 256) != 0) {
      expect_error(
        net$register_custom_layer("FollowingNumeric", named$create, named$destroy),
        class = "ncnn_error"
      )
      rm(named)
      ncnn_gc()
      expect_false(ncnn_alive(ref))
    } else {
      net$register_custom_layer("FollowingNumeric", named$create, named$destroy)
      net$load_param_mem("7767517\n2 2\nInput data 0 1 data\nFollowingNumeric custom 1 1 data output\n")
      net$load_model(ncnn_datareader_empty())
      ncnn_infer(net, 3)
      net$clear()
      expect_equal(named$destroyed, 1L)
      expect_length(named$layers, 0L)
    }
    ncnn_load(net, "index", index)
    ncnn_infer(net, 2)
    net$clear()
    expect_equal(indexed$destroyed, 1L)
    expect_length(indexed$layers, 0L)
  })
}

test_that("replacements, failures and builtin overrides do not use up named slots", {
  net <- ncnn_net(num_threads = 1)
  for (i in 0:259) ncnn_register(net, ncnn_factory(i), "name")
  builtin <- ncnn_factory(0)
  net$register_custom_layer("Input", builtin$create, builtin$destroy)
  net$register_custom_layer(16, builtin$create, builtin$destroy)
  rejected <- ncnn_factory(1)
  rejected_ref <- rlang::new_weakref(rejected)
  for (index in c(-1, 1000000 + 256)) {
    expect_error(net$register_custom_layer(index, rejected$create, rejected$destroy), class = "ncnn_error")
  }
  rm(rejected)
  ncnn_gc()
  expect_false(ncnn_alive(rejected_ref))
  for (i in 1:255) ncnn_register(net, ncnn_factory(i), "name", i)
  ncnn_load(net, "name", 255)
  ncnn_infer(net, 256)
  net$clear()
  expect_equal(builtin$destroyed, 1L)
  expect_length(builtin$layers, 0L)
})

test_that("a creator returning no layer fails the load and retains nothing", {
  net <- ncnn_net(num_threads = 1)
  previous <- new.env()
  previous$create <- function() NULL
  previous$destroy <- function(layer) stop("no layer was created")
  ref <- rlang::new_weakref(previous)
  net$register_custom_layer("CustomLayer0", previous$create, previous$destroy)
  err <- expect_error(
    net$load_param_mem("7767517\n1 1\nCustomLayer0 custom 0 1 output\n"),
    class = "ncnn_error"
  )
  expect_match(conditionMessage(err), "CustomLayer0.*not an object made by ncnn_layer")
  rm(previous)
  current <- ncnn_factory(1)
  ncnn_register(net, current, "name")
  ncnn_gc()
  expect_false(ncnn_alive(ref))
  # the net stays usable
  ncnn_load(net, "name")
  ncnn_infer(net, 2)
})

test_that("a session with a global net holding custom layers exits cleanly", {
  script <- paste(
    "library(ggmlR, warn.conflicts = FALSE)",
    "held <- list()",
    "net <- ncnn_net(num_threads = 1)",
    "net$register_custom_layer('CustomLayer', function() { l <- ncnn_layer(function(x) x); held[[length(held) + 1]] <<- l; l }, function(layer) held[[1]] <<- NULL)",
    "net$load_param_mem('7767517\\n2 2\\nInput data 0 1 data\\nCustomLayer custom 1 1 data output\\n')",
    "cat('loaded\\n')",
    sep = "\n"
  )
  file <- tempfile(fileext = ".R")
  writeLines(script, file)
  out <- tempfile()
  err <- tempfile()
  status <- withr_env_system(file, out, err)
  expect_equal(status, 0L)
  expect_equal(readLines(out), "loaded")
  expect_equal(readLines(err), character())
})

test_that("long type names and many registrations stay valid as the registry grows", {
  net <- ncnn_net(num_threads = 1)
  class(net) <- c("derived_net", class(net))
  f <- ncnn_factory(7)
  ref <- rlang::new_weakref(f)
  name <- strrep("CustomLayerWithLongTypeNameBeyondSmallStringStorage_", 2)
  param <- sprintf("7767517\n2 2\nInput data 0 1 data\n%s custom 1 1 data output\n", name)
  net$register_custom_layer(name, f$create, f$destroy)
  rm(name)
  for (i in 0:34) {
    net$register_custom_layer(sprintf("OtherLongCustomLayerTypeName_%d", i), f$create, f$destroy)
  }
  net$load_param_mem(param)
  net$load_model(ncnn_datareader_empty())
  ncnn_infer(net, 8)
  net$clear()
  expect_equal(f$destroyed, 1L)
  rm(f, net)
  ncnn_gc()
  expect_false(ncnn_alive(ref))
})

test_that("destroyers run when a net is garbage collected, with the current destroyer", {
  net <- ncnn_net(num_threads = 1)
  first <- ncnn_factory(1)
  ncnn_register(net, first, "name")
  ncnn_load(net, "name")
  second <- new.env()
  second$got <- list()
  second$destroy <- function(layer) second$got[[length(second$got) + 1]] <- layer
  net$register_custom_layer("CustomLayer0", first$create, second$destroy)
  layer <- first$layers[[1]]
  rm(net)
  ncnn_gc()
  expect_length(second$got, 1L)
  expect_true(identical(second$got[[1]], layer))
  expect_equal(first$destroyed, 0L)
})
