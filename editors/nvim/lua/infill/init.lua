-- infill for Neovim (0.7 or later): starts infill-lsp for buffers of the languages infill knows
-- (Python, JavaScript, TypeScript, Go, Rust, Java, C, C++), and adds commands.
--
--   require('infill').setup {
--     cmd = { 'infill-lsp' },                        -- the server command (default)
--     init_options = { modelPath = '/path/to/model', steps = 32 },  -- initializationOptions
--     settings = { infill = { temperature = 0.2 } },  -- answers workspace/configuration
--     filetypes = { 'python', 'go' },                -- buffers to attach to (default: M.FILETYPES)
--   }
--
-- Commands (each takes a range: a linewise selection fills whole lines, a charwise one exactly
-- its characters; without a range they work at the cursor):
--
--   :InfillFill            fill the selection, or the node (statement, body...) at the cursor
--   :InfillFix             fix the selection, or the statement at the cursor (the quick fix
--                          first when there is a syntax error there)
--   :InfillDoc[!]          add a docstring (Python) or a doc comment (the language's convention
--                          elsewhere) to the definition at the cursor (!: to every definition of
--                          the file that lacks one)
--   :InfillAlternatives    fill the selection with the best of N candidates, then offer the
--                          others in a menu (vim.ui.select)
--   :InfillCancel          cancel the request in flight
--
-- They are the server's code actions, listed for the range and resolved (the model runs then);
-- vim.lsp.buf.code_action() / range_code_action() show the same ones. Only APIs present in
-- Neovim 0.7 are used (vim.lsp.start_client + vim.lsp.buf_attach_client).

local M = {}

M.client_id = nil -- the running client, started on the first buffer of one of M.filetypes
M.config = nil -- the vim.lsp.start_client configuration setup() built
-- The filetypes of the languages infill knows (infill/text/languages.py); Neovim sends the filetype
-- as the languageId.
M.FILETYPES = {
  'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact',
  'go', 'rust', 'java', 'c', 'cpp',
}

-- Lua cannot tell an empty object from an empty list: send {} as a JSON object.
local function object(value)
  if value == nil or (type(value) == 'table' and next(value) == nil) then
    return vim.empty_dict()
  end
  return value
end

local function wants(filetypes, filetype)
  for _, wanted in ipairs(filetypes) do
    if wanted == filetype then
      return true
    end
  end
  return false
end

--- Start the server (once; again if it has stopped). Returns the client id, or nil.
function M.start()
  if M.config == nil then
    error('infill: call require("infill").setup{} first')
  end
  local client = M.client_id and vim.lsp.get_client_by_id(M.client_id)
  if client and not client.is_stopped() then
    return M.client_id
  end
  M.client_id = vim.lsp.start_client(M.config)
  return M.client_id
end

--- Attach buffer `bufnr` (0: the current one) to the server, starting it if needed.
function M.attach(bufnr)
  if bufnr == nil or bufnr == 0 then
    bufnr = vim.api.nvim_get_current_buf()
  end
  local id = M.start()
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

-- ---------------------------------------------------------------------------- commands

-- Code action kinds of the server (lsp_server/actions.py).
local KINDS = {
  selection = 'refactor.rewrite.infill.selection',
  node = 'refactor.rewrite.infill.node',
  fix = 'refactor.rewrite.infill.fix',
  alternatives = 'refactor.rewrite.infill.alternatives',
  docstring = 'refactor.rewrite.infill.docstring',
  file_docstrings = 'source.infill.docstrings',
  quickfix = 'quickfix',
}

M.busy = false -- a command is waiting for the server
M.last = nil -- what the last command did: { ok = bool, message = string, title = string?, choices = {...}? }
M.pending = nil -- { client = client, id = request id } of the request in flight

local function finish(ok, message, extra)
  M.busy = false
  M.pending = nil
  M.last = vim.tbl_extend('force', { ok = ok, message = message }, extra or {})
  vim.notify('infill: ' .. message, ok and vim.log.levels.INFO or vim.log.levels.WARN)
end

-- LSP position (UTF-16) of byte column `col` on 0-based `row`.
local function position(bufnr, row, col)
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  local _, character = vim.str_utfindex(line, math.min(col, #line))
  return { line = row, character = character }
end

-- The end of line `row` (0-based) as a line boundary: column 0 of the line after; past the last
-- line only if the buffer ends with a line break (as the text the server has does).
local function after_line(bufnr, row)
  local count = vim.api.nvim_buf_line_count(bufnr)
  if row + 1 < count or vim.bo[bufnr].eol then
    return { line = row + 1, character = 0 }
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
  return position(bufnr, row, #line)
end

-- Bytes of the UTF-8 character that starts at byte `col` (0-based) of `line`.
local function char_bytes(line, col)
  local byte = line:byte(col + 1) or 0
  return byte >= 0xF0 and 4 or byte >= 0xE0 and 3 or byte >= 0xC0 and 2 or 1
end

--- The LSP range a command works on. opts: the user command's (range, line1, line2).
--- No range: the cursor (an empty range). A range from a charwise visual selection (`v`, whose
--- marks are on line1 and line2): from its first character to past its last (a selection
--- past the end of a line takes the line break too). Any other range: whole lines, from
--- column 0 of line1 to column 0 of the line after line2 (the line-boundary rule keeps them whole).
function M.command_range(bufnr, opts)
  if opts.range == 0 then
    local cursor = vim.api.nvim_win_get_cursor(0)
    local here = position(bufnr, cursor[1] - 1, cursor[2])
    return { start = here, ['end'] = here }
  end
  local first, last = opts.line1 - 1, opts.line2 - 1
  local from = vim.api.nvim_buf_get_mark(bufnr, '<')
  local to = vim.api.nvim_buf_get_mark(bufnr, '>')
  if vim.fn.visualmode() == 'v' and from[1] - 1 == first and to[1] - 1 == last then
    local line = vim.api.nvim_buf_get_lines(bufnr, last, last + 1, false)[1] or ''
    local stop
    if to[2] >= #line then
      stop = after_line(bufnr, last)
    else
      stop = position(bufnr, last, to[2] + char_bytes(line, to[2]))
    end
    return { start = position(bufnr, first, from[2]), ['end'] = stop }
  end
  return { start = { line = first, character = 0 }, ['end'] = after_line(bufnr, last) }
end

local function client_for(bufnr)
  local client = M.client_id and vim.lsp.get_client_by_id(M.client_id)
  if not client or client.is_stopped() then
    return nil, 'the server is not running (is this buffer of a language infill works in? see :LspInfo)'
  end
  if not vim.lsp.buf_is_attached(bufnr, client.id) then
    return nil, 'this buffer is not attached to infill-lsp'
  end
  return client
end

local function request(client, method, params, bufnr, handler)
  local ok, id
  ok, id = client.request(method, params, function(err, result)
    if M.pending and M.pending.id == id then
      M.pending = nil
    end
    handler(err, result)
  end, bufnr)
  if ok then
    M.pending = { client = client, id = id }
  else
    finish(false, method .. ' could not be sent')
  end
end

local function error_text(err)
  return type(err) == 'table' and (err.message or vim.inspect(err)) or tostring(err)
end

-- Apply a resolved action's edit; then `after(action)` or finish.
local function apply(client, bufnr, action, after)
  if not action.edit then
    finish(false, 'the server resolved "' .. action.title .. '" without an edit')
    return
  end
  vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
  if after then
    after(action)
  else
    finish(true, action.title, { title = action.title })
  end
end

--- Run the server's action for `range`: list the actions of `kinds` (in order of preference),
--- resolve the first found (the model runs now), apply its edit, then `after(action)`.
function M.run(bufnr, range, kinds, what, after)
  if M.busy then
    finish(false, 'busy with the previous command (:InfillCancel stops it)')
    return
  end
  local client, why = client_for(bufnr)
  if not client then
    finish(false, why)
    return
  end
  M.busy, M.last = true, nil
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = range,
    context = { diagnostics = {}, only = kinds },
  }
  request(client, 'textDocument/codeAction', params, bufnr, function(err, actions)
    if err then
      finish(false, 'textDocument/codeAction failed: ' .. error_text(err))
      return
    end
    local chosen
    for _, kind in ipairs(kinds) do
      for _, action in ipairs(actions or {}) do
        if chosen == nil and action.kind == kind then
          chosen = action
        end
      end
    end
    if not chosen then
      finish(false, 'nothing to ' .. what .. ' here')
      return
    end
    if chosen.edit then -- already resolved
      apply(client, bufnr, chosen, after)
      return
    end
    vim.notify('infill: ' .. chosen.title .. '...', vim.log.levels.INFO)
    request(client, 'codeAction/resolve', chosen, bufnr, function(rerr, resolved)
      if rerr then
        finish(false, chosen.title .. ' failed: ' .. error_text(rerr))
      elseif not resolved or not resolved.edit then
        finish(false, chosen.title .. ': no edit')
      else
        apply(client, bufnr, resolved, after)
      end
    end)
  end)
end

function M.fill(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local kind = opts.range == 0 and KINDS.node or KINDS.selection
  M.run(bufnr, M.command_range(bufnr, opts), { kind }, 'fill')
end

function M.fix(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  M.run(bufnr, M.command_range(bufnr, opts), { KINDS.quickfix, KINDS.fix }, 'fix')
end

--- What documentation is called in the buffer's language: "docstring" in Python, else "doc
--- comment" (as the server's action titles say: infill/text/languages.py, Language.doc_noun).
function M.doc_noun(bufnr)
  return vim.bo[bufnr].filetype == 'python' and 'docstring' or 'doc comment'
end

function M.doc(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local kind = opts.bang and KINDS.file_docstrings or KINDS.docstring
  local range = M.command_range(bufnr, opts)
  range['end'] = range.start -- the definition around the start
  M.run(bufnr, range, { kind }, 'document (no definition without a ' .. M.doc_noun(bufnr) .. ')')
end

--- Fill the selection with the best candidate, then offer the others: the server lists them,
--- resolved, for a range at the filled span once the edit is applied.
function M.alternatives(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  if opts.range == 0 then
    finish(false, 'select the code to fill first (alternatives need a selection)')
    return
  end
  local range = M.command_range(bufnr, opts)
  M.run(bufnr, range, { KINDS.alternatives }, 'fill', function(best)
    local client = client_for(bufnr)
    local edge = { start = range.start, ['end'] = range.start }
    local params = {
      textDocument = { uri = vim.uri_from_bufnr(bufnr) },
      range = edge,
      context = { diagnostics = {}, only = { KINDS.alternatives } },
    }
    request(client, 'textDocument/codeAction', params, bufnr, function(err, actions)
      local others = {}
      for _, action in ipairs(err == nil and actions or {}) do
        if action.edit then
          table.insert(others, action)
        end
      end
      local titles = vim.tbl_map(function(a) return a.title end, others)
      if #others == 0 then
        finish(true, best.title .. ' (no other candidate)', { title = best.title, choices = titles })
        return
      end
      vim.ui.select(others, {
        prompt = 'Infill: other candidates (Esc keeps the one applied)',
        format_item = function(action) return action.title end,
      }, function(choice)
        if choice then
          apply(client, bufnr, choice, function(action)
            finish(true, action.title, { title = action.title, choices = titles })
          end)
        else
          finish(true, best.title, { title = best.title, choices = titles })
        end
      end)
    end)
  end)
end

function M.cancel()
  local pending = M.pending
  if pending then
    pending.client.cancel_request(pending.id)
    finish(false, 'cancelled')
  else
    vim.notify('infill: nothing to cancel', vim.log.levels.INFO)
  end
end

local function define_commands()
  local command = vim.api.nvim_create_user_command
  command('InfillFill', M.fill, { range = true, desc = 'infill: fill the selection, or the node at the cursor' })
  command('InfillFix', M.fix, { range = true, desc = 'infill: fix the selection, or the statement at the cursor' })
  command('InfillDoc', M.doc, { range = true, bang = true, desc = 'infill: add a docstring or doc comment (!: to the whole file)' })
  command('InfillAlternatives', M.alternatives, { range = true, desc = 'infill: fill with a choice of candidates' })
  command('InfillCancel', M.cancel, { desc = 'infill: cancel the request in flight' })
end

function M.setup(opts)
  opts = opts or {}
  local init_options = object(opts.init_options)
  local settings = opts.settings or { infill = init_options }
  M.filetypes = opts.filetypes or M.FILETYPES
  M.config = {
    name = 'infill',
    cmd = opts.cmd or { 'infill-lsp' },
    cmd_env = opts.cmd_env,
    root_dir = opts.root_dir or vim.loop.cwd(),
    init_options = init_options,
    settings = object(settings),
    capabilities = opts.capabilities,
    handlers = opts.handlers,
    on_attach = opts.on_attach,
    on_exit = function(code, signal, client_id)
      if client_id == M.client_id then
        M.client_id = nil
      end
      if opts.on_exit then
        opts.on_exit(code, signal, client_id)
      end
    end,
  }
  define_commands()
  local group = vim.api.nvim_create_augroup('infill_lsp', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.filetypes,
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  -- Buffers already open when setup() runs.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and wants(M.filetypes, vim.bo[bufnr].filetype) then
      M.attach(bufnr)
    end
  end
  return M
end

return M
